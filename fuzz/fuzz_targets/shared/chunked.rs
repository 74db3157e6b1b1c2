//! Feeding a fuzz input to a stream parser as a proxy connection does: the first byte picks
//! a chunk size (1–64), the rest arrives in chunks of it, and after each chunk the parser is
//! run until it needs more, with what it consumed dropped and any body it said to swallow
//! (an item too large, an unknown opcode's) discarded as it arrives. Shared by the Memcached
//! targets (included with `#[path]`: fuzz targets are separate binaries).

/// What the parser made of the buffer.
pub enum Step {
    /// A request needs more bytes.
    Incomplete,
    /// The connection would close (a protocol error): the input is done.
    Close,
    /// A request of `consumed` bytes, followed by `swallow` bytes to discard.
    Request { consumed: usize, swallow: usize },
}

/// Runs `parse` over `data` as described above.
pub fn feed(data: &[u8], mut parse: impl FnMut(&[u8]) -> Step) {
    let Some((&first, rest)) = data.split_first() else { return };
    let chunk = (first as usize % 64) + 1;
    let mut buf: Vec<u8> = Vec::new();
    let mut swallow = 0usize;
    for piece in rest.chunks(chunk) {
        buf.extend_from_slice(piece);
        loop {
            if swallow > 0 {
                let n = swallow.min(buf.len());
                buf.drain(..n);
                swallow -= n;
                if swallow > 0 {
                    break;
                }
            }
            match parse(&buf) {
                Step::Incomplete => break,
                Step::Close => return,
                Step::Request { consumed, swallow: skip } => {
                    assert!(consumed > 0 && consumed <= buf.len(), "consumed {consumed} of {}", buf.len());
                    buf.drain(..consumed);
                    swallow = skip;
                }
            }
        }
    }
}
