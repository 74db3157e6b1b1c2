//! Argument positions that need more than the table's (first, last, step): XREAD and
//! XREADGROUP name their keys after STREAMS, past options that take values; the pub/sub
//! commands name channels.

use crate::table::CommandId;

/// The channels a command names, for the ACL's channel rules, and whether they are patterns;
/// None for a command without channel arguments.
pub fn channel_args<'a>(id: CommandId, argv: &[&'a [u8]]) -> Option<(Vec<&'a [u8]>, bool)> {
    match id {
        CommandId::Publish | CommandId::Spublish => Some((argv.get(1).into_iter().copied().collect(), false)),
        CommandId::Subscribe | CommandId::Ssubscribe => Some((argv.get(1..).unwrap_or_default().to_vec(), false)),
        CommandId::Psubscribe => Some((argv.get(1..).unwrap_or_default().to_vec(), true)),
        _ => None,
    }
}

/// The positions of XREAD's or XREADGROUP's stream keys: the first half of the arguments
/// after STREAMS. Options are skipped as the engine's parser reads them (BLOCK and COUNT take
/// a value, GROUP two, NOACK none), so a group or consumer named "streams" is not taken for
/// the keyword; a call the parser would refuse has no keys.
pub fn stream_read_keys(argv: &[&[u8]]) -> Vec<usize> {
    let is = |a: &[u8], word: &str| a.eq_ignore_ascii_case(word.as_bytes());
    let mut i = 1;
    while i < argv.len() {
        let more = argv.len() - i - 1;
        let o = argv[i];
        if (is(o, "BLOCK") || is(o, "COUNT")) && more > 0 {
            i += 1;
        } else if is(o, "STREAMS") && more > 0 {
            let n = argv.len() - (i + 1);
            if !n.is_multiple_of(2) {
                return Vec::new();
            }
            return (i + 1..i + 1 + n / 2).collect();
        } else if is(o, "GROUP") && more >= 2 {
            i += 2;
        } else if !is(o, "NOACK") {
            return Vec::new();
        }
        i += 1;
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::stream_read_keys;

    fn keys(args: &[&str]) -> Vec<usize> {
        let argv: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        stream_read_keys(&argv)
    }

    #[test]
    fn stream_keys_are_the_first_half_after_streams() {
        assert_eq!(keys(&["xread", "STREAMS", "a", "b", "0", "0"]), vec![2, 3]);
        assert_eq!(keys(&["xread", "COUNT", "2", "BLOCK", "10", "streams", "a", "$"]), vec![6]);
        assert_eq!(keys(&["xreadgroup", "GROUP", "streams", "streams", "NOACK", "STREAMS", "s", ">"]), vec![6]);
        // Unbalanced, unknown options, or no STREAMS: no keys (the command fails anyway).
        assert!(keys(&["xread", "STREAMS", "a", "b", "0"]).is_empty());
        assert!(keys(&["xread", "FOO", "STREAMS", "a", "0"]).is_empty());
        assert!(keys(&["xread", "COUNT", "1"]).is_empty());
    }
}
