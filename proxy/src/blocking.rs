//! A blocking command (BLPOP & co., XREAD/XREADGROUP BLOCK) whose slot is handed over to
//! another engine while it waits. Pushes to its keys now go to the new engine, so the old
//! one wakes it with `handed_over_error`; the proxy does not pass that on but sends the call
//! again to the engine its slot map names once the move is over, with what is left of the
//! call's timeout — the client sees one blocking call, as it would had nothing moved.

use std::borrow::Cow;

use bytes::{Bytes, BytesMut};
use terrace_commands::table::CommandId;
use tokio::time::{Duration, Instant};

/// How many times one call is sent again before the refusal goes to the client (a slot map
/// that never changes: a proxy the coordinator does not know).
pub const MAX_RESENDS: u32 = 100;
/// The pause before a call goes again to the engine that refused it (its slot was not held
/// here and the map did not change: the map may be on its way).
pub const SAME_ENGINE_PAUSE: Duration = Duration::from_millis(100);

/// A blocking call as the client sent it, kept until it is answered.
pub struct BlockingCall {
    id: CommandId,
    argv: Vec<Bytes>,
    first_sent: Instant,
    /// The engine it was sent to last.
    pub engine: usize,
    /// Times it was sent again.
    pub resends: u32,
}

/// Where a call's timeout is, and its unit.
#[derive(Debug, PartialEq)]
enum Timeout {
    /// Seconds, possibly fractional (BLPOP & co.).
    Seconds(usize),
    /// Milliseconds (XREAD BLOCK).
    Millis(usize),
}

impl BlockingCall {
    pub fn new(id: CommandId, argv: &[&[u8]], engine: usize) -> BlockingCall {
        BlockingCall { id, argv: argv.iter().map(|a| Bytes::copy_from_slice(a)).collect(), first_sent: Instant::now(), engine, resends: 0 }
    }

    /// The call as it is to be sent now: its timeout lowered by the time it has waited (at
    /// least 1 ms, as 0 would mean "forever"); a timeout of 0 or one that does not parse is
    /// sent as it was (the engine answers a bad one).
    pub fn request_now(&self) -> BytesMut {
        let waited = self.first_sent.elapsed();
        let mut args: Vec<Cow<[u8]>> = self.argv.iter().map(|a| Cow::Borrowed(&a[..])).collect();
        match timeout_of(self.id, &self.argv) {
            Some(Timeout::Seconds(i)) => {
                if let Some(left) = text(&self.argv[i]).and_then(|t| t.parse::<f64>().ok()).filter(|t| t.is_finite() && *t > 0.0) {
                    let left = (left - waited.as_secs_f64()).max(0.001);
                    args[i] = Cow::Owned(format!("{left:.3}").into_bytes());
                }
            }
            Some(Timeout::Millis(i)) => {
                if let Some(left) = text(&self.argv[i]).and_then(|t| t.parse::<u64>().ok()).filter(|t| *t > 0) {
                    let left = left.saturating_sub(waited.as_millis() as u64).max(1);
                    args[i] = Cow::Owned(left.to_string().into_bytes());
                }
            }
            None => {}
        }
        let mut out = BytesMut::new();
        crate::resp::encode_request(&mut out, &args);
        out
    }
}

fn text(arg: &[u8]) -> Option<&str> {
    std::str::from_utf8(arg).ok()
}

/// The position of a blocking call's timeout argument.
fn timeout_of<A: AsRef<[u8]>>(id: CommandId, argv: &[A]) -> Option<Timeout> {
    use CommandId::*;
    let last = argv.len().checked_sub(1)?;
    match id {
        Blpop | Brpop | Bzpopmin | Bzpopmax | Brpoplpush | Blmove => Some(Timeout::Seconds(last)),
        Blmpop | Bzmpop if argv.len() > 1 => Some(Timeout::Seconds(1)),
        // XREAD [COUNT n] [BLOCK ms] STREAMS …; XREADGROUP GROUP g c [COUNT n] [BLOCK ms]
        // [NOACK] STREAMS … (options read in pairs: a group or consumer named "block", or
        // a key after STREAMS, is not the option).
        Xread | Xreadgroup => {
            let mut i = if id == Xreadgroup { 4 } else { 1 };
            while i < argv.len() {
                let a = argv[i].as_ref();
                if a.eq_ignore_ascii_case(b"STREAMS") {
                    return None;
                } else if a.eq_ignore_ascii_case(b"BLOCK") {
                    return (i + 1 < argv.len()).then_some(Timeout::Millis(i + 1));
                } else if a.eq_ignore_ascii_case(b"NOACK") {
                    i += 1;
                } else {
                    i += 2;
                }
            }
            None
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<&[u8]> {
        s.split(' ').map(str::as_bytes).collect()
    }

    fn sent(call: &BlockingCall) -> Vec<String> {
        let req = call.request_now();
        let text = String::from_utf8(req.to_vec()).unwrap();
        text.split("\r\n").skip(2).step_by(2).filter(|s| !s.is_empty()).map(String::from).collect()
    }

    #[test]
    fn finds_each_commands_timeout() {
        use CommandId::*;
        assert_eq!(timeout_of(Blpop, &args("BLPOP a b 5")), Some(Timeout::Seconds(3)));
        assert_eq!(timeout_of(Blmove, &args("BLMOVE a b LEFT RIGHT 0.5")), Some(Timeout::Seconds(5)));
        assert_eq!(timeout_of(Bzmpop, &args("BZMPOP 2 1 a MIN")), Some(Timeout::Seconds(1)));
        assert_eq!(timeout_of(Xread, &args("XREAD COUNT 2 BLOCK 100 STREAMS s $")), Some(Timeout::Millis(4)));
        assert_eq!(timeout_of(Xreadgroup, &args("XREADGROUP GROUP block c NOACK BLOCK 7 STREAMS s >")), Some(Timeout::Millis(6)));
        // "BLOCK" as a key or group name is not the option.
        assert_eq!(timeout_of(Xread, &args("XREAD STREAMS BLOCK 5")), None);
        assert_eq!(timeout_of(Xreadgroup, &args("XREADGROUP GROUP BLOCK 5 STREAMS s >")), None);
    }

    #[test]
    fn a_call_sent_again_keeps_what_is_left_of_its_timeout() {
        let waited = |mut call: BlockingCall, d: Duration| {
            call.first_sent -= d;
            call
        };
        let call = waited(BlockingCall::new(CommandId::Blpop, &args("BLPOP q 5"), 0), Duration::from_millis(1250));
        let forever = waited(BlockingCall::new(CommandId::Brpop, &args("BRPOP q 0"), 0), Duration::from_millis(1250));
        let xread = waited(BlockingCall::new(CommandId::Xread, &args("XREAD BLOCK 1500 STREAMS s $"), 0), Duration::from_millis(1250));
        // (The elapsed time is at least what was set: the seconds' rounding leaves room.)
        assert!(["3.750", "3.749", "3.748"].contains(&sent(&call)[2].as_str()), "{:?}", sent(&call));
        assert_eq!(sent(&forever), ["BRPOP", "q", "0"]);
        let ms: u64 = sent(&xread)[2].parse().unwrap();
        assert!((240..=250).contains(&ms), "{ms}");
        // Run out: the shortest wait, not 0 ("forever").
        let call = waited(call, Duration::from_secs(10));
        let xread = waited(xread, Duration::from_secs(10));
        assert_eq!(sent(&call), ["BLPOP", "q", "0.001"]);
        assert_eq!(sent(&xread), ["XREAD", "BLOCK", "1", "STREAMS", "s", "$"]);
        let bad = BlockingCall::new(CommandId::Blpop, &args("BLPOP q soon"), 0);
        assert_eq!(sent(&bad), ["BLPOP", "q", "soon"]);
    }
}
