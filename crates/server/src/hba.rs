//! Client authentication rules in PostgreSQL's form: `pg_hba.conf` (the `hba_file` setting,
//! by default in the data directory), one rule a line,
//! `local|host|hostssl|hostnossl  database  user  address  method`, with `#` comments.
//!
//! - Fields: database and user are `all` or comma-separated names (database also
//!   `sameuser`); the address is `all`, CIDR (`10.0.0.0/8`, `::1/128`) or an address and a
//!   netmask in two fields; the method is `trust`, `scram-sha-256`, `password` (the password
//!   in clear, checked against the SCRAM verifier; for TLS connections) or `reject`. `local`
//!   lines are accepted and never match: quire has no Unix-domain socket.
//! - The first line whose connection type, database, user and address match decides; no match
//!   refuses the connection (28000, PostgreSQL's "no pg_hba.conf entry" message).
//! - A line that does not parse refuses the start, naming the file and the line number, as
//!   PostgreSQL refuses to load such a file.
//! - The file is read once at start ([`Hba::load`]); it is written with [`DEFAULT_HBA`] (trust
//!   for 127.0.0.1/32 and ::1/128 only) when the default path has no file, i.e. on a data
//!   directory's first start (or the first since roles existed).
//! - [`Hba::trust_beyond_loopback`] names the first `trust` line that covers a non-loopback
//!   address: the server refuses to listen beyond loopback while there is one.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use quire_engine::vfs::{OpenMode, Vfs};

/// The file written on first start.
pub const DEFAULT_HBA: &str = "\
# quire's client authentication rules, in PostgreSQL's pg_hba.conf form:
# TYPE  DATABASE  USER  ADDRESS  METHOD
# TYPE: local, host, hostssl, hostnossl; METHOD: trust, scram-sha-256, password, reject.
# The first matching line decides. A `trust` line covering a non-loopback address keeps the
# server from listening on one.
host    all       all   127.0.0.1/32   trust
host    all       all   ::1/128        trust
";

/// Most bytes `pg_hba.conf` may have (a bound on what start-up reads).
const MAX_HBA_BYTES: u64 = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum HbaError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: line {line}: {message}")]
    Line {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnType {
    Local,
    Host,
    HostSsl,
    HostNoSsl,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Trust,
    ScramSha256,
    Password,
    Reject,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Names {
    All,
    /// database `sameuser`.
    SameUser,
    List(Vec<String>),
}

/// An address range: `addr` with the first `prefix` bits significant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Net {
    addr: IpAddr,
    prefix: u8,
}

impl Net {
    fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(a), IpAddr::V4(b)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(a) & mask == u32::from(b) & mask
            }
            (IpAddr::V6(a), IpAddr::V6(b)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(a) & mask == u128::from(b) & mask
            }
            _ => false,
        }
    }

    /// Whether every address in the range is a loopback address.
    fn only_loopback(&self) -> bool {
        match self.addr {
            IpAddr::V4(a) => self.prefix >= 8 && a.octets()[0] == 127,
            IpAddr::V6(a) => self.prefix == 128 && a.is_loopback(),
        }
    }
}

/// One rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// 1-based, for messages.
    pub line: usize,
    pub conn_type: ConnType,
    databases: Names,
    users: Names,
    /// `None`: `all` (or a `local` line, which has no address).
    address: Option<Net>,
    pub method: Method,
}

/// The rules of one `pg_hba.conf`.
#[derive(Clone, Debug)]
pub struct Hba {
    pub path: PathBuf,
    rules: Vec<Rule>,
}

fn names(field: &str) -> Names {
    if field == "all" {
        return Names::All;
    }
    Names::List(
        field
            .split(',')
            .map(|n| n.trim_matches('"').to_string())
            .collect(),
    )
}

fn prefix_of_mask(mask: IpAddr) -> Option<u8> {
    let (bits, width) = match mask {
        IpAddr::V4(m) => (u128::from(u32::from(m)) << 96, 32),
        IpAddr::V6(m) => (u128::from(m), 128),
    };
    let ones = bits.leading_ones();
    // A netmask is ones then zeros.
    (bits.checked_shl(ones).unwrap_or(0) == 0 && ones <= width).then_some(ones as u8)
}

impl Hba {
    /// Parses the file's text; `path` names it in errors.
    pub fn parse(path: &Path, text: &str) -> Result<Hba, HbaError> {
        let mut rules = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let bad = |message: String| HbaError::Line {
                path: path.to_path_buf(),
                line,
                message,
            };
            let content = raw.split('#').next().unwrap_or("");
            let fields: Vec<&str> = content.split_whitespace().collect();
            if fields.is_empty() {
                continue;
            }
            let conn_type = match fields[0] {
                "local" => ConnType::Local,
                "host" => ConnType::Host,
                "hostssl" => ConnType::HostSsl,
                "hostnossl" => ConnType::HostNoSsl,
                t => return Err(bad(format!("invalid connection type \"{t}\""))),
            };
            let (address, rest) = if conn_type == ConnType::Local {
                (None, fields.get(3..))
            } else {
                let Some(a) = fields.get(3) else {
                    return Err(bad("end-of-line before IP address specification".into()));
                };
                if *a == "all" {
                    (None, fields.get(4..))
                } else if let Some((ip, prefix)) = a.split_once('/') {
                    let addr: IpAddr = ip
                        .parse()
                        .map_err(|_| bad(format!("invalid IP address \"{ip}\"")))?;
                    let width = if addr.is_ipv4() { 32 } else { 128 };
                    let prefix = prefix
                        .parse::<u8>()
                        .ok()
                        .filter(|p| *p <= width)
                        .ok_or_else(|| bad(format!("invalid CIDR mask in address \"{a}\"")))?;
                    (Some(Net { addr, prefix }), fields.get(4..))
                } else {
                    let addr: IpAddr = a
                        .parse()
                        .map_err(|_| bad(format!("invalid IP address \"{a}\"")))?;
                    let mask = fields
                        .get(4)
                        .and_then(|m| m.parse::<IpAddr>().ok())
                        .filter(|m| m.is_ipv4() == addr.is_ipv4())
                        .and_then(prefix_of_mask)
                        .ok_or_else(|| {
                            bad(format!(
                                "specify an address range in CIDR notation, or a netmask after \"{a}\""
                            ))
                        })?;
                    (Some(Net { addr, prefix: mask }), fields.get(5..))
                }
            };
            let (Some(database), Some(user)) = (fields.get(1), fields.get(2)) else {
                return Err(bad("end-of-line before role specification".into()));
            };
            let method = match rest.and_then(|r| r.first()).copied() {
                Some("trust") => Method::Trust,
                Some("scram-sha-256") => Method::ScramSha256,
                Some("password") => Method::Password,
                Some("reject") => Method::Reject,
                Some(m) => {
                    return Err(bad(format!(
                        "invalid authentication method \"{m}\" (quire knows trust, scram-sha-256, password, reject)"
                    )))
                }
                None => return Err(bad("end-of-line before authentication method".into())),
            };
            if rest.is_some_and(|r| r.len() > 1) {
                return Err(bad("authentication options are not supported".into()));
            }
            let databases = if *database == "sameuser" {
                Names::SameUser
            } else {
                names(database)
            };
            let users = names(user);
            if matches!(&users, Names::List(l) if l.iter().any(|u| u.starts_with('+') || u.starts_with('@')))
            {
                return Err(bad(
                    "group (+role) and file (@file) user names are not supported".into(),
                ));
            }
            rules.push(Rule {
                line,
                conn_type,
                databases,
                users,
                address,
                method,
            });
        }
        Ok(Hba {
            path: path.to_path_buf(),
            rules,
        })
    }

    /// Reads `path` through `vfs`; when it is missing and `write_default`, writes
    /// [`DEFAULT_HBA`] there first.
    pub fn load(vfs: &dyn Vfs, path: &Path, write_default: bool) -> Result<Hba, HbaError> {
        let io = |source| HbaError::Io {
            path: path.to_path_buf(),
            source,
        };
        if write_default && !vfs.exists(path).map_err(io)? {
            let f = vfs.open(path, OpenMode::CreateNew).map_err(io)?;
            f.write_at(DEFAULT_HBA.as_bytes(), 0).map_err(io)?;
            f.sync_all().map_err(io)?;
            tracing::info!(path = %path.display(), "wrote the default pg_hba.conf (trust on loopback only)");
        }
        let f = vfs.open(path, OpenMode::Existing).map_err(io)?;
        let size = f.size().map_err(io)?;
        if size > MAX_HBA_BYTES {
            return Err(io(std::io::Error::other(format!(
                "the file has {size} bytes; at most {MAX_HBA_BYTES} are allowed"
            ))));
        }
        let mut buf = vec![0u8; usize::try_from(size).map_err(|e| io(std::io::Error::other(e)))?];
        let mut done = 0;
        while done < buf.len() {
            let n = f.read_at(&mut buf[done..], done as u64).map_err(io)?;
            if n == 0 {
                break;
            }
            done += n;
        }
        buf.truncate(done);
        let text = String::from_utf8(buf)
            .map_err(|_| io(std::io::Error::other("the file is not UTF-8")))?;
        Self::parse(path, &text)
    }

    /// The first rule for a TCP connection from `peer` (over TLS or not) as `user` to
    /// `database`.
    pub fn matching(&self, peer: IpAddr, ssl: bool, user: &str, database: &str) -> Option<&Rule> {
        let peer = peer.to_canonical();
        self.rules.iter().find(|r| {
            let type_ok = match r.conn_type {
                ConnType::Local => false,
                ConnType::Host => true,
                ConnType::HostSsl => ssl,
                ConnType::HostNoSsl => !ssl,
            };
            let database_ok = match &r.databases {
                Names::All => true,
                Names::SameUser => database == user,
                Names::List(l) => l.iter().any(|d| d == database),
            };
            let user_ok = match &r.users {
                Names::All | Names::SameUser => true,
                Names::List(l) => l.iter().any(|u| u == user),
            };
            let address_ok = r.address.is_none_or(|n| n.contains(peer));
            type_ok && database_ok && user_ok && address_ok
        })
    }

    /// The first `trust` rule that lets in a connection from beyond loopback.
    pub fn trust_beyond_loopback(&self) -> Option<&Rule> {
        self.rules.iter().find(|r| {
            r.method == Method::Trust
                && r.conn_type != ConnType::Local
                && r.address.is_none_or(|n| !n.only_loopback())
        })
    }

    /// Whether some rule wants TLS (`hostssl`).
    pub fn needs_ssl(&self) -> Option<&Rule> {
        self.rules.iter().find(|r| r.conn_type == ConnType::HostSsl)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hba(text: &str) -> Hba {
        Hba::parse(Path::new("pg_hba.conf"), text).expect("parses")
    }

    #[test]
    fn the_first_matching_line_decides() {
        let h = hba("\
# comment
local all all trust
hostssl all alice 0.0.0.0/0 password
host sameuser all 10.0.0.0 255.0.0.0 scram-sha-256
host all bob,carol 10.1.0.0/16 reject
host all all 10.0.0.0/8 scram-sha-256 # trailing comment
host all all ::1/128 trust
");
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let m = |peer: &str, ssl, user, db| {
            h.matching(ip(peer), ssl, user, db)
                .map(|r| (r.line, r.method))
        };
        assert_eq!(
            m("1.2.3.4", true, "alice", "x"),
            Some((3, Method::Password))
        );
        assert_eq!(m("1.2.3.4", false, "alice", "x"), None);
        assert_eq!(
            m("10.1.2.3", false, "bob", "bob"),
            Some((4, Method::ScramSha256))
        );
        assert_eq!(m("10.1.2.3", false, "bob", "x"), Some((5, Method::Reject)));
        assert_eq!(
            m("10.9.2.3", false, "bob", "x"),
            Some((6, Method::ScramSha256))
        );
        assert_eq!(m("::1", false, "bob", "x"), Some((7, Method::Trust)));
        assert_eq!(
            m("::ffff:10.9.2.3", false, "bob", "x"),
            Some((6, Method::ScramSha256))
        );
        assert_eq!(m("127.0.0.1", false, "bob", "x"), None);
        assert!(h.trust_beyond_loopback().is_none());
        assert_eq!(h.needs_ssl().map(|r| r.line), Some(3));
    }

    #[test]
    fn trust_beyond_loopback_is_named() {
        assert!(hba(DEFAULT_HBA).trust_beyond_loopback().is_none());
        for (text, line) in [
            (
                "host all all 127.0.0.1/32 trust\nhost all all 0.0.0.0/0 trust\n",
                2,
            ),
            ("host all all all trust\n", 1),
            ("host all all 127.0.0.0/7 trust\n", 1),
            ("host all all ::/0 trust\n", 1),
        ] {
            assert_eq!(
                hba(text).trust_beyond_loopback().map(|r| r.line),
                Some(line),
                "{text}"
            );
        }
    }

    #[test]
    fn bad_lines_are_refused_with_their_number() {
        for (text, line, words) in [
            (
                "host all all 127.0.0.1/32 trust\nhots all all all trust\n",
                2,
                "connection type",
            ),
            ("host all all 127.0.0.1/33 trust\n", 1, "CIDR"),
            ("host all all 127.0.0.1 trust\n", 1, "netmask"),
            ("\n\nhost all all all md5\n", 3, "authentication method"),
            ("host all all all\n", 1, "end-of-line"),
            ("host all +admins all trust\n", 1, "group"),
        ] {
            let e = Hba::parse(Path::new("/d/pg_hba.conf"), text).unwrap_err();
            let s = e.to_string();
            assert!(
                s.starts_with(&format!("/d/pg_hba.conf: line {line}: ")),
                "{s}"
            );
            assert!(s.contains(words), "{s}");
        }
    }
}
