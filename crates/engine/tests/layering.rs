//! The layer order written in each library crate's `src/lib.rs` is the order its code's
//! imports obey: the engine's, the SQL layer's and the server's ([`crate_src_dirs`]).
//!
//! `lib.rs` lists the crate's modules bottom to top under "## Layers, bottom to top". This
//! test reads that list and every `crate::` path in the engine's non-test code, and fails on
//! a path that names a module listed later than the module it is written in (an import that
//! goes up), and on a module that `lib.rs` declares but the list leaves out. Comments and
//! test code (`tests.rs`, `tests_*.rs`, and a trailing `#[cfg(test)] mod`) are not read:
//! tests may reach across layers.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

/// A file may be at most this long (a limit on the scan; the largest is far below).
const MAX_FILE_BYTES: usize = 4 * 1024 * 1024;

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The `src` directories of the workspace's library crates, each with its own layer list.
/// (`quire` and `quire-bench` are binaries of two and three modules that import nothing of
/// each other.)
fn crate_src_dirs() -> Vec<PathBuf> {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    ["engine", "sql", "server"]
        .iter()
        .map(|c| crates.join(c).join("src"))
        .collect()
}

/// The modules `lib.rs` declares: `mod x;`, `pub mod x;`, `pub(crate) mod x;`, and the
/// names listed in its `internal_modules! { a, b, ... }` block.
fn declared_modules(lib_rs: &str) -> Vec<String> {
    let mut mods = Vec::new();
    let mut in_block = false;
    for line in lib_rs.lines() {
        let line = line.trim();
        if line.starts_with("internal_modules! {") {
            in_block = true;
            continue;
        }
        if in_block {
            if line.starts_with('}') {
                in_block = false;
            } else {
                let names = line.split(',').map(str::trim).filter(|n| !n.is_empty());
                mods.extend(names.map(str::to_string));
            }
            continue;
        }
        let rest = line
            .strip_prefix("pub(crate) mod ")
            .or_else(|| line.strip_prefix("pub mod "))
            .or_else(|| line.strip_prefix("mod "));
        // `pub mod $name;` in the macro's own body is not a module.
        let name = rest.and_then(|r| r.strip_suffix(';')).map(str::trim);
        if let Some(name) = name.filter(|n| n.chars().all(|c| c.is_alphanumeric() || c == '_')) {
            mods.push(name.to_string());
        }
    }
    mods
}

/// The rank of each declared module: its place in the layer list of `lib.rs`'s header (the
/// first time its name stands in backticks there).
fn layer_ranks(lib_rs: &str, declared: &[String]) -> HashMap<String, usize> {
    let section: Vec<&str> = lib_rs
        .lines()
        .skip_while(|l| !l.starts_with("//! ## Layers, bottom to top"))
        .skip(1)
        .take_while(|l| !l.starts_with("//! ##") && !l.starts_with("//! On top"))
        .filter(|l| {
            // Only the numbered list and its continuation lines.
            let body = l.trim_start_matches("//!").trim_start();
            body.starts_with(|c: char| c.is_ascii_digit()) || l.starts_with("//!    ")
        })
        .collect();
    let mut ranks = HashMap::new();
    for line in section {
        for (i, piece) in line.split('`').enumerate() {
            // Odd pieces are inside backticks; a module name is a plain identifier there.
            if i % 2 == 1 && declared.iter().any(|m| m == piece) && !ranks.contains_key(piece) {
                let rank = ranks.len();
                ranks.insert(piece.to_string(), rank);
            }
        }
    }
    ranks
}

/// The engine's source files that are not test code, with their top-level module.
fn code_files(src: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let mut dirs = vec![src.to_path_buf()];
    // Bounded: the source tree is a few levels deep.
    for _ in 0..10_000 {
        let Some(dir) = dirs.pop() else { break };
        for entry in fs::read_dir(&dir).expect("the source tree is readable") {
            let path = entry.expect("a readable directory entry").path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            if path.is_dir() {
                if name != "tests" {
                    dirs.push(path);
                }
                continue;
            }
            let is_test = name == "tests.rs" || name.starts_with("tests_");
            if path.extension().is_none_or(|e| e != "rs") || is_test || path == src.join("lib.rs") {
                continue;
            }
            let rel = path.strip_prefix(src).expect("under src");
            let first = rel.components().next().expect("a path under src");
            let module = first
                .as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_string();
            out.push((module, path));
        }
    }
    assert!(
        dirs.is_empty(),
        "the source tree is deeper than the scan allows"
    );
    out.sort();
    out
}

/// The code of a file without comments and without its inline test module.
fn code_of(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut code = String::new();
    for (n, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]") {
            // An inline test module closes the file (the project's convention); a
            // `mod tests;` declaration or any other test-only item does not end the code.
            let next = lines[n + 1..]
                .iter()
                .map(|l| l.trim())
                .find(|l| !l.is_empty());
            if next.is_some_and(|l| l.starts_with("mod ") && l.contains('{')) {
                break;
            }
        }
        let without_comment = match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        };
        code.push_str(without_comment);
        code.push('\n');
    }
    code
}

/// The modules named by `crate::` paths in `code`, with their line numbers.
fn crate_paths(code: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            let before = rest[..at].chars().next_back();
            rest = &rest[at + "crate::".len()..];
            // `super::crate::` cannot occur; `my_crate::` is another name.
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            if let Some(group) = rest.strip_prefix('{') {
                out.extend(group_heads(group).into_iter().map(|m| (n + 1, m)));
            } else {
                let ident: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                out.push((n + 1, ident));
            }
        }
    }
    out
}

/// The first identifier of each item of a `use crate::{a::x, b, c::{y, z}}` group (the text
/// after the opening brace, on one line).
fn group_heads(group: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0usize;
    let mut at_item_start = true;
    let mut ident = String::new();
    for c in group.chars() {
        if depth == 0 && (c.is_alphanumeric() || c == '_') {
            if at_item_start {
                ident.push(c);
            }
            continue;
        }
        if !ident.is_empty() {
            heads.push(std::mem::take(&mut ident));
        }
        if c.is_whitespace() {
            continue;
        }
        at_item_start = false;
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => at_item_start = true,
            _ => {}
        }
    }
    heads
}

/// Every import that goes up the layer order, as "file:line: a -> b" lines.
fn violations(src: &Path) -> (Vec<String>, Vec<String>) {
    let lib_rs = fs::read_to_string(src.join("lib.rs")).expect("lib.rs");
    let declared = declared_modules(&lib_rs);
    let ranks = layer_ranks(&lib_rs, &declared);
    let unlisted: Vec<String> = declared
        .iter()
        .filter(|m| !ranks.contains_key(*m))
        .cloned()
        .collect();
    let mut up = Vec::new();
    for (module, path) in code_files(src) {
        let text = fs::read_to_string(&path).expect("a readable source file");
        assert!(
            text.len() <= MAX_FILE_BYTES,
            "{} is too large",
            path.display()
        );
        let from = ranks.get(&module);
        for (line, target) in crate_paths(&code_of(&text)) {
            let (Some(from), Some(to)) = (from, ranks.get(&target)) else {
                continue;
            };
            if to > from {
                let file = path
                    .strip_prefix(src)
                    .unwrap_or(&path)
                    .display()
                    .to_string();
                up.push(format!("src/{file}:{line}: {module} -> {target}"));
            }
        }
    }
    (up, unlisted)
}

#[test]
fn every_module_is_in_the_layer_list() {
    for src in crate_src_dirs() {
        let (_, unlisted) = violations(&src);
        assert!(
            unlisted.is_empty(),
            "modules declared in {}/lib.rs but missing from its layer list: {unlisted:?}",
            src.display()
        );
    }
}

#[test]
fn no_import_goes_up_the_layer_order() {
    for src in crate_src_dirs() {
        let (up, _) = violations(&src);
        let mut msg = String::new();
        for v in &up {
            writeln!(msg, "  {v}").expect("writing to a String");
        }
        assert!(
            up.is_empty(),
            "{} imports go up the layer order of {}/lib.rs:\n{msg}",
            up.len(),
            src.display()
        );
    }
}

#[test]
fn the_declarations_are_read_from_both_forms() {
    let lib = "pub mod vfs;\nmod db;\ninternal_modules! {\n    wal, heap,\n    btree,\n}\n";
    assert_eq!(declared_modules(lib), ["vfs", "db", "wal", "heap", "btree"]);
}

#[test]
fn the_scanner_sees_plain_paths_and_groups() {
    let code = code_of(
        "use crate::wal::Lsn;\n#[cfg(test)]\nmod tests;\nuse crate::{buffer::{A, B}, page, smgr::X};\n// crate::db in a comment\nlet x = crate::heap::f(my_crate::z);\n#[cfg(test)]\nmod tests { use crate::db; }\n",
    );
    let names: Vec<String> = crate_paths(&code).into_iter().map(|(_, m)| m).collect();
    assert_eq!(names, ["wal", "buffer", "page", "smgr", "heap"]);
}

#[test]
fn a_planted_back_edge_is_caught() {
    // A copy of the source tree with one import going up: the check must see it.
    let tmp = tempfile::tempdir().expect("a temporary directory");
    copy_tree(&src_dir(), tmp.path());
    // At the end of the file, after its `#[cfg(test)] mod tests;` declaration: the whole
    // file is read, not only its head.
    let wal = tmp.path().join("wal/mod.rs");
    let text = fs::read_to_string(&wal).expect("wal/mod.rs");
    let line = text.lines().count() + 1;
    fs::write(&wal, format!("{text}use crate::session::Transaction;\n")).expect("write");
    let (up, _) = violations(tmp.path());
    assert_eq!(up, [format!("src/wal/mod.rs:{line}: wal -> session")]);
}

fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("create dir");
    for entry in fs::read_dir(from).expect("read dir") {
        let path = entry.expect("entry").path();
        let dest = to.join(path.file_name().expect("a file name"));
        if path.is_dir() {
            copy_tree(&path, &dest);
        } else {
            fs::copy(&path, &dest).expect("copy");
        }
    }
}
