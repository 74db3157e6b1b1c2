// The console's one script. A form with `data-confirm` asks before it is sent (the
// Content-Security-Policy allows no inline handlers, so the pages carry the question as
// data and this attaches it). Times the server wrote in UTC (`data-epoch`: Unix seconds)
// are rewritten in the viewer's local time, with the date.
document.addEventListener("submit", function (event) {
  var question = event.target.getAttribute("data-confirm");
  if (question && !window.confirm(question)) {
    event.preventDefault();
  }
});

document.addEventListener("DOMContentLoaded", function () {
  var two = function (n) { return (n < 10 ? "0" : "") + n; };
  var months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
  // A chart's ticks name the date once (on the first tick, and where it changes).
  var lastDate = new Map();
  document.querySelectorAll("[data-epoch]").forEach(function (el) {
    var d = new Date(Number(el.getAttribute("data-epoch")) * 1000);
    var span = Number(el.getAttribute("data-span") || "86400");
    var time = two(d.getHours()) + ":" + two(d.getMinutes()) + (span < 600 ? ":" + two(d.getSeconds()) : "");
    var date = months[d.getMonth()] + " " + d.getDate();
    var chart = el.closest("svg");
    if (chart && el.classList.contains("time")) {
      el.textContent = lastDate.get(chart) === date ? time : date + " " + time;
      lastDate.set(chart, date);
    } else {
      el.textContent = date + " " + time;
    }
  });
  document.querySelectorAll("svg.chart").forEach(function (svg) {
    svg.querySelectorAll("text").forEach(function (t) {
      if (!t.hasAttribute("data-epoch") && / \(UTC\)$/.test(t.textContent)) {
        t.textContent = t.textContent.replace(/ \(UTC\)$/, " (local time)");
      }
    });
  });
});
