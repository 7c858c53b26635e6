//! jsonb's output: the canonical text (`jsonb_out`: `{"a": 1, "b": [1, 2]}`),
//! `jsonb_pretty`'s indented form and the compact form json functions that rebuild a
//! document write (`{"a":1}`), all written from an explicit stack (no recursion).

use std::fmt::Write as _;

use super::{push_string, Jsonb};

/// One step of writing.
enum Step<'a> {
    Value(&'a Jsonb, usize),
    Key(&'a str),
    Text(&'static str),
    /// A line break and the indentation of a level (pretty form only).
    Indent(usize),
}

impl Jsonb {
    /// The canonical text (jsonb's output function).
    pub(crate) fn to_text(&self) -> String {
        let mut out = String::new();
        write(self, &mut out, Style::Canonical);
        out
    }

    /// `jsonb_pretty`'s form: one member a line, four spaces a level.
    pub(crate) fn pretty(&self) -> String {
        let mut out = String::new();
        write(self, &mut out, Style::Pretty);
        out
    }

    /// Without blanks (`json_strip_nulls`' output).
    pub(crate) fn compact(&self) -> String {
        let mut out = String::new();
        write(self, &mut out, Style::Compact);
        out
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Style {
    Canonical,
    Pretty,
    Compact,
}

fn write(v: &Jsonb, out: &mut String, style: Style) {
    let pretty = style == Style::Pretty;
    let sep = if style == Style::Canonical { ", " } else { "," };
    let colon = if style == Style::Compact { ":" } else { ": " };
    let mut stack = vec![Step::Value(v, 0)];
    while let Some(step) = stack.pop() {
        match step {
            Step::Text(t) => out.push_str(t),
            Step::Key(k) => {
                push_string(out, k);
                out.push_str(colon);
            }
            Step::Indent(level) => {
                if pretty {
                    out.push('\n');
                    out.extend(std::iter::repeat_n(' ', level * 4));
                }
            }
            Step::Value(v, level) => match v {
                Jsonb::Array(items) => {
                    out.push('[');
                    stack.push(Step::Text("]"));
                    stack.push(Step::Indent(level));
                    for (i, item) in items.iter().enumerate().rev() {
                        stack.push(Step::Value(item, level + 1));
                        stack.push(Step::Indent(level + 1));
                        if i > 0 {
                            stack.push(Step::Text(sep));
                        }
                    }
                }
                Jsonb::Object(pairs) => {
                    out.push('{');
                    stack.push(Step::Text("}"));
                    stack.push(Step::Indent(level));
                    for (i, (k, item)) in pairs.iter().enumerate().rev() {
                        stack.push(Step::Value(item, level + 1));
                        stack.push(Step::Key(k));
                        stack.push(Step::Indent(level + 1));
                        if i > 0 {
                            stack.push(Step::Text(sep));
                        }
                    }
                }
                scalar => write_scalar(scalar, out),
            },
        }
    }
}

fn write_scalar(v: &Jsonb, out: &mut String) {
    match v {
        Jsonb::Null => out.push_str("null"),
        Jsonb::Bool(true) => out.push_str("true"),
        Jsonb::Bool(false) => out.push_str("false"),
        Jsonb::Number(n) => {
            let _ = write!(out, "{n}");
        }
        Jsonb::String(s) => push_string(out, s),
        Jsonb::Array(_) | Jsonb::Object(_) => {}
    }
}
