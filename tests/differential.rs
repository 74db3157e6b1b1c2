//! Differential test: the same command script runs against a real redis-server (7.0, from
//! Debian; tests/run.sh installs it) and against `terrace engine`, and every reply must be
//! byte-for-byte identical. The script avoids replies whose order or value Redis itself leaves
//! unspecified (set/hash iteration order, random members, timings).

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{encode, start_redis, Engine};

const SCRIPT: &str = r##"
SET k v
GET k
SET k v NX
SET k w XX GET
SET k v EX 0
SET k v PX -1
SET k v NX XX
SET k v EX notanumber
SETNX k x
SETEX k 0 v
GETSET k new
GETDEL k
GETDEL k
APPEND s hello
APPEND s world
STRLEN s
GETRANGE s 0 4
GETRANGE s -5 -1
GETRANGE s 5 2
GETRANGE s -1 -5
SETRANGE s 20 x
SETRANGE s -1 x
GET s
INCR n
INCRBY n 10
DECR n
DECRBY n 3
INCRBYFLOAT n 1.5
INCRBYFLOAT n abc
INCR s
INCRBY n 9223372036854775807
SET big 9223372036854775807
INCR big
DECRBY n -9223372036854775808
MSET a 1 b 2 c 3
MSET a 1 b
MGET a b nokey c
MSETNX a 1 z 2
MSETNX y 1 z 2
EXISTS a b nokey a
DEL a b nokey
TYPE c
TYPE nokey
LCS s s
SET lcs1 ohmytext
SET lcs2 mynewtext
LCS lcs1 lcs2
LCS lcs1 lcs2 LEN
LCS lcs1 lcs2 IDX
LCS lcs1 lcs2 IDX MINMATCHLEN 4 WITHMATCHLEN
LCS lcs1 lcs2 LEN IDX
GET
GET a b
NOSUCHCOMMAND a b
RPUSH l a b c d e
LPUSH l z
LRANGE l 0 -1
LRANGE l -100 100
LRANGE l 5 1
LINDEX l 2
LINDEX l 100
LSET l 0 first
LSET l 100 x
LSET nolist 0 x
LINSERT l BEFORE c inserted
LINSERT l AFTER nothere x
LINSERT l MIDDLE c x
LPOS l c
LPOS l c RANK 0
LPOS l c COUNT -1
LPOS l a RANK -1 MAXLEN 2
LREM l 0 inserted
LTRIM l 1 3
LRANGE l 0 -1
LPOP l
RPOP l 2
LPOP l 0
LPOP nolist
LPOP nolist 2
LPOP l -1
RPUSH m 1 2 3
LMOVE m m2 LEFT RIGHT
LMOVE m m2 UP DOWN
RPOPLPUSH m m2
LRANGE m2 0 -1
LMPOP 2 nolist m2 RIGHT COUNT 5
LMPOP 0 m2 LEFT
LMPOP 1 m2 LEFT COUNT 0
BLPOP nolist 0.01
BLPOP nolist -1
BLPOP nolist abc
LLEN k
LPUSH s x
HSET h f1 v1 f2 v2
HSET h f1
HGET h f1
HGET h nofield
HMGET h f1 nofield f2
HSETNX h f1 x
HINCRBY h f1 1
HINCRBY h n 5
HINCRBYFLOAT h n 0.25
HINCRBYFLOAT h f1 1
HSTRLEN h f2
HEXISTS h f2
HDEL h f2 nofield
HLEN h
HGET s x
SADD st a b c
SADD st a
SCARD st
SISMEMBER st a
SMISMEMBER st a z
SREM st a z
SINTERCARD 1 st
SINTERCARD 0 st
SINTERCARD 1 st LIMIT -1
SMOVE st st2 b
SMOVE st st2 nomember
SCARD st2
SPOP st -1
SRANDMEMBER nokey
SRANDMEMBER nokey 5
SINTERSTORE dest st nokey
SUNIONSTORE dest st st2
SDIFFSTORE dest st st2
ZADD z 1 a 2 b 3 c
ZADD z NX XX 1 a
ZADD z GT LT 1 a
ZADD z INCR 1 a 2 b
ZADD z 1
ZADD z nan a
ZADD z xx a
ZADD z CH GT 0 a 5 b
ZADD z INCR 10 c
ZRANGE z 0 -1 WITHSCORES
ZRANGE z (1 +inf BYSCORE
ZRANGE z +inf -inf BYSCORE REV LIMIT 0 2
ZRANGE z 0 -1 LIMIT 0 1
ZRANGE z [a [c BYLEX WITHSCORES
ZREVRANGE z 0 -1
ZRANGEBYSCORE z -inf +inf WITHSCORES LIMIT 1 1
ZREVRANGEBYSCORE z +inf -inf
ZRANGEBYSCORE z x 1
ZRANK z b
ZREVRANK z b
ZRANK z nomember
ZSCORE z c
ZMSCORE z a nomember c
ZCOUNT z -inf +inf
ZCOUNT z (2 +inf
ZINCRBY z 2.5 a
ZCARD z
ZADD lex 0 a 0 b 0 c 0 d 0 e
ZRANGEBYLEX lex - +
ZRANGEBYLEX lex [b (d
ZREVRANGEBYLEX lex + - LIMIT 1 2
ZRANGEBYLEX lex b d
ZLEXCOUNT lex [b +
ZREMRANGEBYLEX lex - [a
ZREMRANGEBYRANK lex 0 0
ZREMRANGEBYSCORE z 100 200
ZPOPMIN lex
ZPOPMAX lex 2
ZPOPMIN lex -1
ZUNIONSTORE u 2 z lex WEIGHTS 2 1 AGGREGATE MAX
ZUNIONSTORE u 0 z
ZINTERSTORE i 2 z u
ZRANGE u 0 -1 WITHSCORES
ZDIFF 2 u z WITHSCORES
ZUNION 2 z u WITHSCORES
ZINTER 2 z u AGGREGATE MIN WITHSCORES
ZINTERCARD 2 z u
ZRANGESTORE zs z 0 1
ZMPOP 1 z MIN COUNT 2
ZMPOP 1 z SIDEWAYS
BZPOPMIN nokey 0.01
ZRANDMEMBER nokey
ZRANDMEMBER nokey 2
ZSCORE h x
EXPIRE k 100
SET e v
EXPIRE e 100 XX
EXPIRE e 100 NX
EXPIRE e 50 GT
EXPIRE e 200 GT
EXPIRE e 10 NX XX
EXPIRE e 10 GT LT
EXPIRE e 10 BOGUS
PERSIST e
PERSIST e
TTL e
PTTL e
TTL nokey
EXPIRETIME e
EXPIREAT e 1
EXISTS e
RENAME nokey x
SET r1 v
RENAME r1 r2
RENAMENX r2 c
RENAMENX r2 r2
COPY r2 r3
COPY r2 r3
COPY r2 r3 REPLACE
COPY r2 r2
COPY r2 r4 DB 99
MOVE r3 1
MOVE r3 0
SELECT 1
GET r3
SELECT 0
SELECT 16
SELECT x
SWAPDB 0 17
SWAPDB x 1
OBJECT ENCODING c
OBJECT ENCODING nokey
OBJECT HELPX
SET bits foobar
BITCOUNT bits
BITCOUNT bits 1 1
BITCOUNT bits 0 -1 BIT
BITPOS bits 1
BITPOS bits 0 2
SETBIT bits 7 1
SETBIT bits 7 2
SETBIT bits -1 1
GETBIT bits 7
BITOP AND dest bits bits
BITOP NOT dest bits bits
BITOP WHAT dest bits
BITFIELD bf SET i8 0 100 INCRBY i8 0 100 GET u4 0
BITFIELD bf OVERFLOW SAT INCRBY i8 0 1000
BITFIELD bf OVERFLOW FAIL INCRBY u2 100 8
BITFIELD bf GET i65 0
BITFIELD_RO bf SET i8 0 1
PFADD hll a b c d
PFADD hll a
PFCOUNT hll
PFADD hll2 c d e
PFMERGE hll3 hll hll2
PFCOUNT hll3
PFCOUNT bits
RPUSH srt 3 1 2
SORT srt
SORT srt DESC LIMIT 0 2
SORT srt ALPHA STORE srtd
LRANGE srtd 0 -1
MULTI
SET t 1
INCR t
LPUSH t x
EXEC
MULTI
SET t 1
BADCMD
EXEC
EXEC
DISCARD
MULTI
MULTI
WATCH x
DISCARD
WATCH t
UNWATCH
PING
PING hello
PING a b
ECHO hi
CLIENT SETNAME "bad name"
CLIENT NOSUCH
CONFIG SET nosuchparam 1
CONFIG GET maxmemory-policy
AUTH x
HELLO 4
HELLO x
DBSIZE
FLUSHDB
DBSIZE
RANDOMKEY
CLIENT SETNAME
OBJECT ENCODING
CONFIG GET
MEMORY NOSUCH
SLOWLOG GET 1 2
SLOWLOG LEN x
CLIENT KILL
CLIENT ID x
COMMAND COUNT x
CONFIG SET maxmemory
OBJECT FREQ
MEMORY USAGE
LATENCY NOPE
XADD st 1-1 a 1
XADD st 1-1 a 1
XADD st 1-* b 2
XADD st 5 c 3
XADD st 0-0 x y
XADD st 3-0 x y
XADD st 7-1 x
XADD st NOMKSTREAM 8-0 x y
XADD nost NOMKSTREAM 8-0 x y
XADD st MAXLEN 3 MINID 1 8-0 x y
XADD st LIMIT 5 8-0 x y
XADD st MAXLEN = 10 LIMIT 5 8-0 x y
XADD st MAXLEN -1 8-0 x y
XADD st MAXLEN abc 8-0 x y
XADD st bad-id x y
XADD st + x y
XADD st 9-0 f1 v1 f2 v2
XLEN st
XLEN nost
XRANGE st - +
XRANGE st - + COUNT 2
XRANGE st - + COUNT 0
XRANGE st (1-1 +
XRANGE st 5 5
XRANGE st (5-0 (9-0
XRANGE st - + COUNT
XRANGE st - + LIMIT 1
XRANGE st (0-0 +
XRANGE st - (0-0
XRANGE st x +
XRANGE nost - +
XREVRANGE st + -
XREVRANGE st + - COUNT 1
XREVRANGE st 5 1-2
XDEL st 1-2 100-0
XDEL st bad
XDEL nost 1-1
XLEN st
XTRIM st MAXLEN 2
XTRIM st MAXLEN ~ 0
XTRIM st MINID 9
XTRIM st
XTRIM st LIMIT 2
XTRIM st MAXLEN 1 LIMIT 2
XTRIM nost MAXLEN 1
XRANGE st - +
XSETID st 1-0
XSETID st 20-0 ENTRIESADDED 1
XSETID st 20-0 ENTRIESADDED 50 MAXDELETEDID 3-0
XSETID nost 1-0
XADD st 30-* late entry
XREAD STREAMS st 0
XREAD COUNT 1 STREAMS st 0-0
XREAD STREAMS st nost 0 0
XREAD STREAMS st 21-0
XREAD STREAMS st
XREAD STREAMS st $
XREAD GROUP g c STREAMS st 0
XREAD STREAMS st >
XREAD BLOCK x STREAMS st 0
XREAD BLOCK -1 STREAMS st 0
SET notstream v
XREAD STREAMS notstream 0
XADD notstream 1-1 a b
XLEN notstream
XADD gs 1-0 a 1
XADD gs 2-0 b 2
XADD gs 3-0 c 3
XGROUP CREATE gs g1 0
XGROUP CREATE gs g1 0
XGROUP CREATE nogs g1 0
XGROUP CREATE nogs g1 $ MKSTREAM
XGROUP CREATE gs g2 $ ENTRIESREAD 2
XGROUP CREATE gs g3 0 ENTRIESREAD -5
XGROUP CREATE gs g3 0 BADOPT
XGROUP CREATE gs
XGROUP NOSUCH gs g1
XGROUP SETID gs nog 0
XINFO GROUPS gs
XREADGROUP GROUP g1 alice COUNT 1 STREAMS gs >
XREADGROUP GROUP g1 bob STREAMS gs >
XREADGROUP GROUP g1 bob STREAMS gs >
XREADGROUP GROUP g1 alice STREAMS gs 0
XREADGROUP GROUP nog alice STREAMS gs >
XREADGROUP GROUP g1 alice STREAMS gs $
XREADGROUP STREAMS gs >
XINFO GROUPS gs
XPENDING gs g1
XPENDING gs g1 - + 10 nobody
XPENDING gs nog
XPENDING gs g1 - +
XACK gs g1 1-0 9-9
XACK gs g1 bad
XACK gs nog 1-0
XPENDING gs g1
XDEL gs 2-0
XREADGROUP GROUP g1 bob STREAMS gs 0
XINFO GROUPS gs
XCLAIM gs g1 carol 0 3-0 JUSTID
XCLAIM gs g1 carol 0 2-0 JUSTID
XCLAIM gs g1 carol x 3-0
XCLAIM gs g1 carol 0 3-0 BOGUS
XCLAIM nogs2 g1 carol 0 3-0
XPENDING gs g1
XAUTOCLAIM gs g1 dave 0 0 COUNT 10 JUSTID
XAUTOCLAIM gs g1 dave 0 0 COUNT 0
XAUTOCLAIM gs nog dave 0 0
XGROUP CREATECONSUMER gs g1 erin
XGROUP CREATECONSUMER gs g1 erin
XGROUP DELCONSUMER gs g1 dave
XGROUP DELCONSUMER gs g1 nobody
XGROUP DESTROY gs g2
XGROUP DESTROY gs g2
XGROUP SETID gs g1 $ ENTRIESREAD 3
XINFO GROUPS gs
XINFO STREAM gs
XINFO STREAM nogs2
XINFO STREAM gs FULL COUNT
XINFO NOSUCH gs
XINFO CONSUMERS gs nog
TYPE gs
OBJECT ENCODING gs
XTRIM gs MAXLEN 0
XINFO STREAM gs
EXISTS gs
ACL SETUSER alice on nopass ~cache:* +get
ACL GETUSER alice
ACL LIST
ACL DRYRUN alice get cache:1
ACL DRYRUN alice get other
ACL DRYRUN alice set cache:1 v
ACL DRYRUN nobody get x
ACL DRYRUN alice nosuchcmd
ACL DRYRUN alice get
ACL SETUSER alice badrule
ACL SETUSER alice ~x allkeys ~y
ACL SETUSER alice +nosuch
ACL SETUSER alice #abc
ACL SETUSER alice <nope
ACL SETUSER alice (+get
ACL SETUSER alice %X~a
ACL GETUSER alice
ACL SETUSER bob reset
ACL GETUSER bob
ACL LIST
ACL USERS
ACL DELUSER default
ACL DELUSER alice bob nobody
ACL GETUSER alice
ACL CAT nosuch
ACL GENPASS 0
ACL GENPASS 5000
ACL LOG x
ACL SAVE
ACL LOAD
ACL WHOAMI
ACL NOSUCH
ACL GETUSER
ACL SETUSER
AUTH nobody pass
AUTH onlypass
CLUSTER INFO
CLUSTER KEYSLOT foo
CLUSTER NOSUCH
CLUSTER INFO extra
READONLY
READWRITE
ASKING
WAIT 0 0
WAIT 1 10
WAIT x 0
WAIT 1 -1
COMMAND GETKEYSANDFLAGS LMOVE a b left left
COMMAND GETKEYSANDFLAGS SET k v
COMMAND GETKEYSANDFLAGS ZUNIONSTORE d 2 a b
COMMAND GETKEYSANDFLAGS MSET a 1 b 2
COMMAND GETKEYSANDFLAGS GET
COMMAND GETKEYSANDFLAGS NOSUCH x
COMMAND GETKEYSANDFLAGS PING
COMMAND GETKEYS SORT k STORE dst
PUBLISH nobody msg
PUBSUB NUMSUB a b
PUBSUB NUMPAT
PUBSUB CHANNELS
PUBSUB NOSUCH
PUBSUB NUMPAT extra
SUBSCRIBE chan1
PING
PING hello
GET k
PUBLISH chan1 x
PSUBSCRIBE pat*
PUBSUB NUMPAT
UNSUBSCRIBE chan1
PUNSUBSCRIBE
PUNSUBSCRIBE
UNSUBSCRIBE
SSUBSCRIBE shard1
SUNSUBSCRIBE shard1
SUNSUBSCRIBE
PING
PUBLISH chan1 x
SPUBLISH shard1 y
SET luastr str
EVAL "return redis.call('lpush','luastr','x')" 0
EVAL "return redis.pcall('lpush','luastr','x')" 0
EVAL "return x" 0
EVAL "x = 1" 0
EVAL "return (" 0
EVAL "error('boom')" 0
EVAL "return redis.error_reply('MY err')" 0
EVAL "return redis.status_reply('FINE')" 0
EVAL "return {1,2,{3,'x'},nil,5}" 0
EVAL "return redis.call('nosuch')" 0
EVAL "return redis.call('get')" 0
EVAL "return redis.call('multi')" 0
EVAL "return redis.call()" 0
EVAL "return redis.call({})" 0
EVAL "return 3.99" 0
EVAL "return true" 0
EVAL "return false" 0
EVAL "return redis.sha1hex('')" 0
EVAL "return KEYS[1]..ARGV[1]" 1 k a
EVAL "return 1" -1
EVAL "return 1" 2 a
EVAL "return 1" x
EVALSHA ffffffffffffffffffffffffffffffffffffffff 0
SCRIPT LOAD "return 'loaded'"
EVALSHA 7e8f9f0b1e34ae6e8e4a43e9e5b30b86b87b7aa0 0
SCRIPT EXISTS ffff
SCRIPT LOAD "return ("
SCRIPT KILL
SCRIPT NOSUCH
EVAL "return {err='x'}" 0
EVAL "return {ok='y'}" 0
EVAL "return redis.call('blpop','nol',0)" 0
EVAL "return cjson.encode({a=1,b={1,2,3},c='x/y'})" 0
EVAL "return cjson.decode(cjson.encode({1,2,{a='b'}}))[3].a" 0
EVAL "return cmsgpack.pack({1,2,3,'abc',{x=true}}, -5, 300, 70000, 1.5, 1e100, nil)" 0
EVAL "return cmsgpack.unpack(cmsgpack.pack({10,20,{30,'y'}}))" 0
EVAL "local a, b = cmsgpack.unpack(cmsgpack.pack(-129, 65536)); return {a, b}" 0
EVAL "return {bit.band(7,3), bit.bor(1,2), bit.bxor(5,1), bit.lshift(1,4), bit.rshift(-1,28), bit.arshift(-16,2), bit.tohex(255), bit.bnot(0)}" 0
EVAL "return redis.call('incr', KEYS[1])" 1 luacounter
EVAL "return redis.call('hgetall', 'nohash')" 0
EVAL "redis.setresp(3); return redis.call('hgetall', 'nohash')" 0
EVAL "return tostring(redis.call('get','nokey'))" 0
EVAL "return redis.call('ping')" 0
EVAL "return redis.call('get', 0.1)" 0
EVAL "return redis.call('select', 5)" 0
EVAL "redis.setresp(4)" 0
EVAL_RO "return redis.call('set','a','1')" 0
EVAL_RO "return redis.call('get','luacounter')" 0
EVAL "return string.format('%d %s %5.2f', 3, 'x', 1.5)" 0
EVAL "return type(cmsgpack)" 0
EVAL "return type(struct)" 0
EVAL "return struct.pack('>I2', 258)" 0
EVAL "return {struct.unpack('<i4', struct.pack('<i4', -5))}" 0
EVAL "return struct.size('!4 b i4 d')" 0
EVAL "return struct.size('bhlTiI3')" 0
EVAL "return {struct.unpack('>h B c2 s', struct.pack('>h B c2 s', -300, 200, 'xyz', 'zz'))}" 0
EVAL "return {struct.unpack('b c0', struct.pack('b c0', 3, 'abc'))}" 0
EVAL "return struct.pack('!8 b d', 1, 1.5)" 0
EVAL "return struct.pack('q', 1)" 0
EVAL "return loadstring('return 1')()" 0
EVAL "return redis.REDIS_VERSION" 0
EVAL "cjson.encode = function() return 1 end" 0
EVAL "redis.call = function() return 1 end" 0
EVAL "bit.band = nil" 0
EVAL "string.rep = nil" 0
EVAL "setmetatable(_G, {})" 0
EVAL "_G = {}" 0
EVAL "rawset(_G, 'x', 1)" 0
EVAL "local g = getmetatable(_G); g.__index = {}" 0
EVAL "return loadstring(string.dump(function() return 1 end))()" 0
EVAL "return cjson.encode({[1]='a',[3]='c'})" 0
EVAL "return pcall(cjson.encode, {[20]=1})" 0
EVAL "cjson.encode_max_depth(1); return pcall(cjson.encode, {{1}})" 0
EVAL "return cjson.encode_keep_buffer(false)" 0
EVAL "return {cmsgpack.unpack_one(cmsgpack.pack(1, 2), 0)}" 0
EVAL "return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 2)}" 0
EVAL "#!lua\nreturn 1" 0
EVAL "#!lua flags=no-writes\nreturn redis.call('set','x','1')" 0
EVAL "#!lua flags=no-writes,allow-oom\nreturn redis.call('get','x')" 0
EVAL "#!not-lua\nreturn 1" 0
EVAL "#!lua badger=data\nreturn 1" 0
EVAL "#!lua flags=allow-oom,what?\nreturn 1" 0
EVAL "#!lua" 0
EVAL_RO "#!lua\nreturn 1" 0
SCRIPT LOAD "#!lua flags=bogus\nreturn 1"
XADD luastream 1-1 f v
EVAL "return redis.pcall('xread','BLOCK',0,'STREAMS','luastream','$')" 0
EVAL "return redis.pcall('xread','STREAMS','luastream','$')" 0
COMMAND GETKEYS eval "return 1" 0
COMMAND GETKEYS get
COMMAND GETKEYS sort abc store invalid store stillbad store def
PFADD hll a b c
PFDEBUG ENCODING hll
PFDEBUG DECODE hll
PFCOUNT hll
GETRANGE hll 0 -1
PFDEBUG TODENSE hll
PFDEBUG ENCODING hll
PFDEBUG TODENSE hll
PFCOUNT hll
PFADD hll2 x y
PFMERGE hll3 hll hll2
PFDEBUG ENCODING hll3
PFCOUNT hll3
PFDEBUG DECODE hll
PFDEBUG NOSUCH hll
PFDEBUG ENCODING nokey
SET str xxxx
BITCOUNT str -6 -7
BITCOUNT str -6 -15 BIT
ZINTERCARD 0 k
XINFO HELP xxx
GEOADD geo XX NX 13.36 38.11 palermo
GEOSEARCH nogeo FROMLONLAT 0 0 BYRADIUS 1 km
GEOSEARCHSTORE geodst nogeo FROMMEMBER m BYBOX 1 1 km
CLIENT KILL
CLIENT KILL ID 10 wrong_arg
CLIENT TRACKINGINFO
CLIENT GETREDIR
CLIENT CACHING YES
CLIENT TRACKING maybe
CLIENT TRACKING ON REDIRECT 999999
CLIENT TRACKING ON PREFIX a
CLIENT TRACKING ON OPTIN OPTOUT
CLIENT TRACKING ON BCAST OPTIN
CLIENT TRACKING ON OPTIN
CLIENT CACHING NO
CLIENT CACHING YES
CLIENT TRACKINGINFO
CLIENT GETREDIR
CLIENT TRACKING ON BCAST PREFIX x
CLIENT TRACKING OFF
CLIENT TRACKING ON BCAST PREFIX x PREFIX xy
CLIENT TRACKING ON BCAST PREFIX x NOLOOP
CLIENT TRACKINGINFO
CLIENT TRACKING OFF
CLIENT TRACKINGINFO
"##;

/// Reads exactly one RESP2 reply, returning its raw bytes.
fn read_reply(r: &mut BufReader<TcpStream>, out: &mut Vec<u8>) {
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line).unwrap();
    assert!(line.len() >= 3, "truncated reply: {:?}", String::from_utf8_lossy(out));
    out.extend_from_slice(&line);
    let n: i64 = std::str::from_utf8(&line[1..line.len() - 2]).ok().and_then(|s| s.parse().ok()).unwrap_or(0);
    match line[0] {
        b'$' if n >= 0 => {
            let mut body = vec![0u8; n as usize + 2];
            r.read_exact(&mut body).unwrap();
            out.extend_from_slice(&body);
        }
        b'*' if n > 0 => {
            for _ in 0..n {
                read_reply(r, out);
            }
        }
        _ => {}
    }
}

fn words(line: &str) -> Vec<String> {
    // Double quotes group words, as in the script above; `\n` is a line break.
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(ch) = chars.next() {
        match ch {
            '\\' if chars.peek() == Some(&'n') => {
                chars.next();
                cur.push('\n');
            }
            '"' => quoted = !quoted,
            ' ' if !quoted => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[test]
fn replies_match_redis_byte_for_byte() {
    let lines: Vec<Vec<String>> = SCRIPT.lines().map(str::trim).filter(|l| !l.is_empty()).map(words).collect();
    let count = assert_same_replies(&lines);
    assert!(count > 250, "script ran {count} commands");
}

/// Sorted sets large enough to span many tree nodes (thousands of members, many equal
/// scores), mutated and queried at random ranks, scores and lex bounds: ranks, index and
/// score ranges with LIMIT, counts and removals must agree with Redis's skiplist.
#[test]
fn large_sorted_sets_match_redis() {
    let mut rng = fastrand::Rng::with_seed(2026);
    let mut lines: Vec<Vec<String>> = Vec::new();
    let mut cmd = |parts: &[String]| lines.push(parts.to_vec());
    let s = |x: &str| x.to_string();
    const MEMBERS: usize = 20_000;
    // Scores: integers with many ties, a few halves, both signs.
    let score = |rng: &mut fastrand::Rng| match rng.u8(0..10) {
        0 => format!("{}.5", rng.i32(-500..500)),
        _ => rng.i32(-2000..2000).to_string(),
    };
    let mut order: Vec<usize> = (0..MEMBERS).collect();
    rng.shuffle(&mut order);
    for chunk in order.chunks(100) {
        let mut c = vec![s("ZADD"), s("z")];
        for &m in chunk {
            c.push(score(&mut rng));
            c.push(format!("m{m}"));
        }
        cmd(&c);
    }
    // Same score throughout: lex ranges.
    for chunk in order.chunks(100) {
        let mut c = vec![s("ZADD"), s("lex")];
        for &m in chunk {
            c.push(s("0"));
            c.push(format!("{:x}", m * 7919 % 100_003));
        }
        cmd(&c);
    }
    let member = |rng: &mut fastrand::Rng| format!("m{}", rng.usize(0..MEMBERS + 50));
    let index = |rng: &mut fastrand::Rng| rng.i64(-(MEMBERS as i64) - 20..MEMBERS as i64 + 20).to_string();
    let score_bound = |rng: &mut fastrand::Rng| match rng.u8(0..8) {
        0 => s("-inf"),
        1 => s("+inf"),
        2 => format!("({}", rng.i32(-2100..2100)),
        _ => rng.i32(-2100..2100).to_string(),
    };
    let lex_bound = |rng: &mut fastrand::Rng| match rng.u8(0..8) {
        0 => s("-"),
        1 => s("+"),
        2 => format!("({:x}", rng.usize(0..100_003)),
        _ => format!("[{:x}", rng.usize(0..100_003)),
    };
    for _ in 0..1500 {
        let c = match rng.u8(0..20) {
            0 => vec![s("ZADD"), s("z"), score(&mut rng), member(&mut rng)],
            1 => vec![s("ZINCRBY"), s("z"), score(&mut rng), member(&mut rng)],
            2 => vec![s("ZREM"), s("z"), member(&mut rng), member(&mut rng)],
            3 => vec![s("ZRANK"), s("z"), member(&mut rng)],
            4 => vec![s("ZREVRANK"), s("z"), member(&mut rng)],
            5 => vec![s("ZRANGE"), s("z"), index(&mut rng), index(&mut rng), s("WITHSCORES")],
            6 => vec![s("ZRANGE"), s("z"), index(&mut rng), index(&mut rng), s("REV")],
            7 => vec![s("ZREVRANGE"), s("z"), index(&mut rng), index(&mut rng)],
            8 => {
                let (lo, hi) = (score_bound(&mut rng), score_bound(&mut rng));
                vec![s("ZRANGEBYSCORE"), s("z"), lo, hi, s("WITHSCORES"), s("LIMIT"), rng.i64(-1..300).to_string(), rng.i64(-1..40).to_string()]
            }
            9 => vec![
                s("ZREVRANGEBYSCORE"),
                s("z"),
                score_bound(&mut rng),
                score_bound(&mut rng),
                s("LIMIT"),
                rng.u32(0..300).to_string(),
                rng.u32(0..40).to_string(),
            ],
            10 => vec![s("ZCOUNT"), s("z"), score_bound(&mut rng), score_bound(&mut rng)],
            11 => vec![
                s("ZRANGE"),
                s("z"),
                score_bound(&mut rng),
                score_bound(&mut rng),
                s("BYSCORE"),
                s("REV"),
                s("LIMIT"),
                rng.u32(0..100).to_string(),
                s("10"),
            ],
            12 => {
                vec![s("ZRANGEBYLEX"), s("lex"), lex_bound(&mut rng), lex_bound(&mut rng), s("LIMIT"), rng.u32(0..200).to_string(), rng.i64(-1..30).to_string()]
            }
            13 => vec![s("ZREVRANGEBYLEX"), s("lex"), lex_bound(&mut rng), lex_bound(&mut rng), s("LIMIT"), rng.u32(0..200).to_string(), s("20")],
            14 => vec![s("ZLEXCOUNT"), s("lex"), lex_bound(&mut rng), lex_bound(&mut rng)],
            // Removals take a few members at a time, so the sets stay large.
            15 => {
                let from = rng.i64(-40..40);
                let to = if from < 0 { (from + rng.i64(0..4)).min(-1) } else { from + rng.i64(0..4) };
                vec![s("ZREMRANGEBYRANK"), s("z"), from.to_string(), to.to_string()]
            }
            16 => {
                let from = rng.i32(-2000..2000);
                vec![s("ZREMRANGEBYSCORE"), s("z"), format!("({from}"), (from + 1).to_string()]
            }
            17 => {
                // Members with one hex prefix ('g' sorts after every hex digit).
                let prefix = format!("{:x}", rng.usize(256..65_536));
                vec![s("ZREMRANGEBYLEX"), s("lex"), format!("[{prefix}"), format!("({prefix}g")]
            }
            18 => vec![s(if rng.bool() { "ZPOPMIN" } else { "ZPOPMAX" }), s("z"), rng.u32(1..4).to_string()],
            _ => vec![s("ZCARD"), s("z")],
        };
        cmd(&c);
    }
    cmd(&[s("ZRANGESTORE"), s("dst"), s("z"), s("100"), s("-100"), s("REV")]);
    cmd(&[s("ZRANGE"), s("dst"), s("0"), s("-1"), s("WITHSCORES")]);
    cmd(&[s("ZRANGE"), s("z"), s("0"), s("-1"), s("WITHSCORES")]);
    cmd(&[s("ZRANGE"), s("lex"), s("0"), s("-1")]);
    assert_same_replies(&lines);
}

/// Sends each command to a fresh redis-server and a fresh engine; fails listing every reply
/// that differs. Returns how many commands ran.
fn assert_same_replies(lines: &[Vec<String>]) -> usize {
    let redis = start_redis();
    let engine = Engine::start(&[]);
    let connect = |port: u16| {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        (s.try_clone().unwrap(), BufReader::new(s))
    };
    let (mut rw, mut rr) = connect(redis.port);
    let (mut tw, mut tr) = connect(engine.port);
    let mut mismatches = Vec::new();
    let mut count = 0;
    for args in lines {
        let line = args.join(" ");
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let req = encode(&refs);
        rw.write_all(&req).unwrap();
        tw.write_all(&req).unwrap();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        read_reply(&mut rr, &mut a);
        read_reply(&mut tr, &mut b);
        count += 1;
        if a != b {
            mismatches.push(format!("{line}\n    redis:   {:?}\n    terrace: {:?}", String::from_utf8_lossy(&a), String::from_utf8_lossy(&b)));
        }
    }
    assert!(mismatches.is_empty(), "{} of {count} replies differ:\n{}", mismatches.len(), mismatches.join("\n"));
    count
}
