//! Wire protocol: request framing (RESP multibulk and inline) and reply encoding (RESP2/RESP3).

pub mod encode;
pub mod peek;
pub mod reply;
pub mod request;

pub use encode::{encode_request, put_bulk, put_header};
pub use peek::{peek_requests, Peeked};
pub use reply::{format_double, format_double_g17, ReplyWriter};
pub use request::{parse_i64, Limits, ProtocolError, Request, RequestParser};
