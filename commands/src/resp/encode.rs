//! Requests as a client writes them: a RESP array of bulk strings. Shared by the proxy's
//! engine connections and an engine's link to its master.

use bytes::BufMut;

/// Appends a request as a RESP array of bulk strings.
pub fn encode_request<A: AsRef<[u8]>>(out: &mut impl BufMut, args: &[A]) {
    put_header(out, b'*', args.len());
    for a in args {
        put_bulk(out, a.as_ref());
    }
}

/// Appends a RESP header: `kind`, the count, CRLF.
pub fn put_header(out: &mut impl BufMut, kind: u8, n: usize) {
    let mut b = itoa::Buffer::new();
    out.put_u8(kind);
    out.put_slice(b.format(n).as_bytes());
    out.put_slice(b"\r\n");
}

/// Appends one bulk string.
pub fn put_bulk(out: &mut impl BufMut, data: &[u8]) {
    put_header(out, b'$', data.len());
    out.put_slice(data);
    out.put_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;

    #[test]
    fn a_request_is_an_array_of_bulk_strings() {
        let mut out = BytesMut::new();
        encode_request(&mut out, &["SET", "k", ""]);
        assert_eq!(&out[..], b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
    }
}
