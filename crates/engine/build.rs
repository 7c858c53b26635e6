//! Makes the SQLSTATE constants (`SqlState::UNIQUE_VIOLATION`, ...) from `src/errcodes.txt`,
//! as PostgreSQL's `generate-errcodes.pl` makes `errcodes.h` from its own. A malformed line
//! fails the build with its line number.

use std::fmt::Write as _;

fn main() {
    let src = "src/errcodes.txt";
    println!("cargo:rerun-if-changed={src}");
    let text = std::fs::read_to_string(src).unwrap_or_else(|e| panic!("{src}: {e}"));
    let mut consts = String::new();
    let mut all = String::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with("Section:") {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (code, kind, name, condition) = match fields.as_slice() {
            [c, k, n] => (*c, *k, *n, ""),
            [c, k, n, cond] => (*c, *k, *n, *cond),
            _ => panic!("{src}:{}: expected 3 or 4 fields: {line}", i + 1),
        };
        let code_ok = code.len() == 5
            && code
                .bytes()
                .all(|b| b.is_ascii_digit() || b.is_ascii_uppercase());
        let name_ok = name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
        assert!(code_ok, "{src}:{}: bad SQLSTATE {code}", i + 1);
        assert!(name_ok, "{src}:{}: bad name {name}", i + 1);
        assert!(
            matches!(kind, "E" | "W" | "S"),
            "{src}:{}: kind must be E, W or S",
            i + 1
        );
        let doc = if condition.is_empty() {
            format!("`{code}`")
        } else {
            format!("`{code}` {condition}")
        };
        writeln!(consts, "    /// {doc}").ok();
        writeln!(
            consts,
            "    pub const {name}: SqlState = SqlState(\"{code}\");"
        )
        .ok();
        if !condition.is_empty() {
            writeln!(all, "    (SqlState::{name}, \"{condition}\"),").ok();
        }
    }
    let out = format!(
        "impl SqlState {{\n{consts}}}\n\n/// Every SQLSTATE with its condition name, in the file's order.\npub(crate) const ALL: &[(SqlState, &str)] = &[\n{all}];\n"
    );
    let dir = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    std::fs::write(format!("{dir}/errcodes.rs"), out).expect("write errcodes.rs");
}
