// The console's one script: a form with `data-confirm` asks before it is sent (the
// Content-Security-Policy allows no inline handlers, so the pages carry the question as
// data and this attaches it).
document.addEventListener("submit", function (event) {
  var question = event.target.getAttribute("data-confirm");
  if (question && !window.confirm(question)) {
    event.preventDefault();
  }
});
