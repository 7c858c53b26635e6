use std::cmp::Ordering;

use super::*;

fn jb(s: &str) -> Jsonb {
    parse_jsonb(s).unwrap()
}

#[test]
fn jsonb_text_is_canonical() {
    assert_eq!(
        jb(r#"{"bb": 1, "a": [1.50, "x\u00e9", null, true], "bb": 1e2}"#).to_text(),
        r#"{"a": [1.50, "xé", null, true], "bb": 100}"#
    );
    assert_eq!(jb("[]").to_text(), "[]");
    assert_eq!(jb(" \"\\ud83d\\ude00\" ").to_text(), "\"😀\"");
}

#[test]
fn jsonb_refuses_what_postgres_refuses() {
    for bad in ["", "[1,]", "{\"a\"}", "01", "\"\\ud83d\"", "tru", "[1] x"] {
        assert!(parse_jsonb(bad).is_err(), "{bad}");
    }
    let e = parse_jsonb("\"\\u0000\"").unwrap_err();
    assert_eq!(e.sqlstate(), SqlState::UNTRANSLATABLE_CHARACTER);
    // json only checks: a lone surrogate and \u0000 pass.
    assert!(parse("\"\\ud83d\\u0000\"").is_ok());
    let deep = "[".repeat(MAX_DEPTH + 2);
    assert_eq!(
        parse(&deep).unwrap_err().sqlstate(),
        SqlState::STATEMENT_TOO_COMPLEX
    );
}

#[test]
fn ordering_follows_postgres() {
    let order = [
        "[]",
        "null",
        "\"a\"",
        "\"b\"",
        "1",
        "2.5",
        "false",
        "true",
        "[1]",
        "[1, 2]",
        "{\"a\": 1}",
        "{\"b\": 0}",
        "{\"a\": 1, \"b\": 1}",
    ];
    for w in order.windows(2) {
        assert_eq!(
            jb(w[0]).compare(&jb(w[1])),
            Ordering::Less,
            "{} < {}",
            w[0],
            w[1]
        );
    }
    assert_eq!(jb("1.0").compare(&jb("1")), Ordering::Equal);
}

#[test]
fn containment_and_paths() {
    let doc = jb(r#"{"a": {"b": [1, 2, {"c": 3}]}, "d": "x"}"#);
    assert!(doc.contains(&jb(r#"{"a": {"b": [{"c": 3}, 1]}}"#)).unwrap());
    assert!(!doc.contains(&jb(r#"{"a": {"b": 1}}"#)).unwrap());
    assert!(jb("[1, 2]").contains(&jb("1")).unwrap());
    assert!(!jb("1").contains(&jb("[1]")).unwrap());
    let path = |p: &[&str]| p.iter().map(|s| Some((*s).to_string())).collect::<Vec<_>>();
    let set = doc
        .set_path(
            &path(&["a", "b", "9"]),
            jb("7"),
            SetMode::Set { create: true },
        )
        .unwrap();
    assert_eq!(
        set.to_text(),
        r#"{"a": {"b": [1, 2, {"c": 3}, 7]}, "d": "x"}"#
    );
    let ins = jb("[1, 2]")
        .set_path(&path(&["0"]), jb("0"), SetMode::Insert { after: false })
        .unwrap();
    assert_eq!(ins.to_text(), "[0, 1, 2]");
    assert_eq!(
        doc.delete_path(&path(&["a", "b"])).unwrap().to_text(),
        r#"{"a": {}, "d": "x"}"#
    );
}

#[test]
fn json_members_keep_the_text_as_written() {
    let text = r#" {"a" : [1,  2], "b":"x\"y"} "#;
    let Members::Object(m) = members(text).unwrap() else {
        panic!("an object")
    };
    assert_eq!(&text[m[0].1.clone()], "[1,  2]");
    assert_eq!(
        json_piece_text(&text[m[1].1.clone()]).unwrap(),
        Value::Text("x\"y".into())
    );
}

#[test]
fn pretty_indents_four_spaces() {
    assert_eq!(
        jb(r#"{"a": [1, {}], "b": 2}"#).pretty(),
        "{\n    \"a\": [\n        1,\n        {\n        }\n    ],\n    \"b\": 2\n}"
    );
}
