//! Expression evaluation (PostgreSQL's execExprInterp): a bound [`Expr`] over the current
//! row and the context's frames. SQL's three-valued logic: comparisons and most functions are
//! NULL when an operand is NULL; AND and OR follow the truth tables (`false AND NULL` is
//! false); a WHERE clause keeps a row only when its predicate is true.
//!
//! ## Rules
//! - [`Expr::eval`] checks the stack at each inner node (`crate::stack`).
//! - A value built here (`||`, an ARRAY(SELECT ...)) has its length checked first
//!   (`types::check_value_len`, 54000); LIKE and regular expressions check the interrupt as
//!   they go through a long text.

use quire_engine::{SqlState, Value};

use crate::context::{Cx, Frame};
use crate::error::{Result, SqlError};
use crate::interrupt::Interrupt;
use crate::nodes::{ArithOp, CmpOp, Expr, Node, SubqueryKind};
use crate::types::{self, as_f64, compare, internal, SqlType};

impl Expr {
    pub(crate) fn eval(&self, cx: &Cx, row: &[Value]) -> Result<Value> {
        if !self.is_leaf() {
            crate::stack::check_stack_depth()?;
        }
        Ok(match self {
            Expr::Const(v) => v.clone(),
            Expr::Param(n) => cx.params.get(*n).cloned().ok_or_else(|| {
                SqlError::new(
                    SqlState::PROTOCOL_VIOLATION,
                    format!("no value for parameter ${}", n + 1),
                )
            })?,
            Expr::Column(c) => row.get(*c).cloned().ok_or_else(|| internal("column"))?,
            Expr::Outer { levels, column } => outer_value(cx, *levels, *column)?,
            Expr::Arith(op, ty, l, r) => arith(*op, *ty, l.eval(cx, row)?, r.eval(cx, row)?)?,
            Expr::Neg(inner) => match inner.eval(cx, row)? {
                Value::Int(i) => Value::Int(i.checked_neg().ok_or_else(out_of_range)?),
                Value::Float(f) => Value::Float(-f),
                Value::Numeric(n) => Value::Numeric(crate::numeric::negate(&n)?),
                v => v,
            },
            Expr::Cmp(op, ty, l, r) => {
                let (l, r) = (l.eval(cx, row)?, r.eval(cx, row)?);
                if l.is_null() || r.is_null() {
                    Value::Null
                } else if *ty == SqlType::Jsonb
                    || ty.element().is_some() && !matches!(op, CmpOp::Eq | CmpOp::Ne)
                {
                    // Equal arrays have equal canonical texts; order is element by element.
                    // jsonb's `=` is its order's too (`1.0 = 1`).
                    Value::Bool(op.holds(types::compare_typed(&l, &r, *ty)?))
                } else {
                    Value::Bool(op.holds(compare(&l, &r)))
                }
            }
            Expr::Concat(l, r) => match (l.eval(cx, row)?, r.eval(cx, row)?) {
                (Value::Text(a), Value::Text(b)) => {
                    types::check_value_len(a.len().saturating_add(b.len()))?;
                    Value::Text(a + &b)
                }
                (Value::Null, _) | (_, Value::Null) => Value::Null,
                _ => return Err(internal("|| operands")),
            },
            Expr::Like {
                expr,
                pattern,
                case_insensitive,
                negated,
            } => match (expr.eval(cx, row)?, pattern.eval(cx, row)?) {
                (Value::Text(s), Value::Text(p)) => {
                    Value::Bool(like(&s, &p, *case_insensitive, cx.interrupt)? != *negated)
                }
                _ => Value::Null,
            },
            Expr::Regex {
                expr,
                pattern,
                case_insensitive,
                negated,
            } => match (expr.eval(cx, row)?, pattern.eval(cx, row)?) {
                (Value::Text(s), Value::Text(p)) => {
                    Value::Bool(regex_match(&s, &p, *case_insensitive, cx.interrupt)? != *negated)
                }
                _ => Value::Null,
            },
            Expr::And(v) => and(v, cx, row)?,
            Expr::Or(v) => or(v, cx, row)?,
            Expr::Not(e) => match e.eval(cx, row)? {
                Value::Bool(b) => Value::Bool(!b),
                _ => Value::Null,
            },
            Expr::IsNull(e, negated) => Value::Bool(e.eval(cx, row)?.is_null() != *negated),
            Expr::IsBool {
                expr,
                value,
                negated,
            } => {
                let is = matches!(expr.eval(cx, row)?, Value::Bool(b) if b == *value);
                Value::Bool(is != *negated)
            }
            Expr::InList {
                expr,
                list,
                negated,
            } => in_list(&expr.eval(cx, row)?, list, *negated, cx, row)?,
            Expr::Case {
                operand,
                whens,
                otherwise,
            } => case(operand.as_deref(), whens, otherwise.as_deref(), cx, row)?,
            Expr::Cast(e, from, to) => cast(e.eval(cx, row)?, *from, *to, cx)?,
            Expr::Func(f, args) => {
                let values = args
                    .iter()
                    .map(|e| e.eval(cx, row))
                    .collect::<Result<Vec<_>>>()?;
                f.call(values, cx)?
            }
            Expr::Subquery(node, kind) => subquery(node, kind, cx, row)?,
        })
    }

    /// Whether the predicate holds (true, not false or NULL).
    pub(crate) fn holds(&self, cx: &Cx, row: &[Value]) -> Result<bool> {
        Ok(matches!(self.eval(cx, row)?, Value::Bool(true)))
    }
}

fn outer_value(cx: &Cx, levels: usize, column: usize) -> Result<Value> {
    let mut frame = cx.outer.ok_or_else(|| internal("outer row"))?;
    for _ in 1..levels {
        frame = frame.up.ok_or_else(|| internal("outer row"))?;
    }
    frame
        .row
        .get(column)
        .cloned()
        .ok_or_else(|| internal("outer column"))
}

fn and(v: &[Expr], cx: &Cx, row: &[Value]) -> Result<Value> {
    let mut unknown = false;
    for e in v {
        match e.eval(cx, row)? {
            Value::Bool(false) => return Ok(Value::Bool(false)),
            Value::Bool(true) => {}
            _ => unknown = true,
        }
    }
    Ok(if unknown {
        Value::Null
    } else {
        Value::Bool(true)
    })
}

fn or(v: &[Expr], cx: &Cx, row: &[Value]) -> Result<Value> {
    let mut unknown = false;
    for e in v {
        match e.eval(cx, row)? {
            Value::Bool(true) => return Ok(Value::Bool(true)),
            Value::Bool(false) => {}
            _ => unknown = true,
        }
    }
    Ok(if unknown {
        Value::Null
    } else {
        Value::Bool(false)
    })
}

/// `v IN (values)` with SQL's NULL rules: true on a match, NULL if no match but a NULL
/// was involved, false otherwise.
fn in_values<'v>(v: &Value, values: impl Iterator<Item = &'v Value>, negated: bool) -> Value {
    if v.is_null() {
        return Value::Null;
    }
    let mut unknown = false;
    for x in values {
        if x.is_null() {
            unknown = true;
        } else if compare(v, x).is_eq() {
            return Value::Bool(!negated);
        }
    }
    if unknown {
        Value::Null
    } else {
        Value::Bool(negated)
    }
}

/// `v IN (list)`, each element evaluated only until one matches (a list may hold millions
/// of constants: none is copied, and an interrupt is checked as it goes).
fn in_list(v: &Value, list: &[Expr], negated: bool, cx: &Cx, row: &[Value]) -> Result<Value> {
    if v.is_null() {
        return Ok(Value::Null);
    }
    let mut unknown = false;
    for (i, e) in list.iter().enumerate() {
        if i % MATCH_STEPS_PER_CHECK == MATCH_STEPS_PER_CHECK - 1 {
            cx.interrupt.check()?;
        }
        let x = match e {
            Expr::Const(x) => std::borrow::Cow::Borrowed(x),
            e => std::borrow::Cow::Owned(e.eval(cx, row)?),
        };
        if x.is_null() {
            unknown = true;
        } else if compare(v, &x).is_eq() {
            return Ok(Value::Bool(!negated));
        }
    }
    Ok(if unknown {
        Value::Null
    } else {
        Value::Bool(negated)
    })
}

fn case(
    operand: Option<&Expr>,
    whens: &[(Expr, Expr)],
    otherwise: Option<&Expr>,
    cx: &Cx,
    row: &[Value],
) -> Result<Value> {
    let subject = operand.map(|o| o.eval(cx, row)).transpose()?;
    for (when, then) in whens {
        let hit = match &subject {
            Some(s) => {
                let w = when.eval(cx, row)?;
                !s.is_null() && !w.is_null() && compare(s, &w).is_eq()
            }
            None => when.holds(cx, row)?,
        };
        if hit {
            return then.eval(cx, row);
        }
    }
    otherwise.map_or(Ok(Value::Null), |o| o.eval(cx, row))
}

/// Casts that need the catalog (an oid shown as a relation or type name) happen here;
/// the rest are [`types::cast`].
fn cast(v: Value, from: SqlType, to: SqlType, cx: &Cx) -> Result<Value> {
    match (&v, from, to) {
        (Value::Int(oid), SqlType::Regclass, t) if t.is_text() => {
            let oid = u32::try_from(*oid).unwrap_or(0);
            Ok(Value::Text(
                crate::pg_catalog::session_relation_name(cx.tx, oid, cx.backend.pid())?
                    .unwrap_or_else(|| oid.to_string()),
            ))
        }
        (Value::Int(oid), SqlType::Regtype, t) if t.is_text() => {
            let oid = u32::try_from(*oid).unwrap_or(0);
            Ok(Value::Text(
                SqlType::from_oid(oid).map_or_else(|| oid.to_string(), SqlType::name),
            ))
        }
        (Value::Int(oid), SqlType::Regnamespace, t) if t.is_text() => Ok(Value::Text(
            crate::pg_catalog::namespace_name(*oid).unwrap_or_else(|| oid.to_string()),
        )),
        (Value::Int(0), SqlType::Regproc, t) if t.is_text() => Ok(Value::Text("-".into())),
        (Value::Text(name), f, SqlType::Regproc) if f.is_text() && name.trim() == "-" => {
            Ok(Value::Int(0))
        }
        (Value::Text(name), f, SqlType::Regproc) if f.is_text() && !is_oid_text(name) => {
            Err(SqlError::new(
                SqlState::UNDEFINED_FUNCTION,
                format!("function \"{name}\" does not exist"),
            ))
        }
        (Value::Text(name), f, SqlType::Regnamespace) if f.is_text() && !is_oid_text(name) => {
            let oid = crate::pg_catalog::namespace_oid(name.trim()).ok_or_else(|| {
                SqlError::new(
                    SqlState::UNDEFINED_SCHEMA,
                    format!("schema \"{name}\" does not exist"),
                )
            })?;
            Ok(Value::Int(oid))
        }
        (Value::Text(name), f, SqlType::Regclass | SqlType::Regtype)
            if f.is_text() && is_oid_text(name) =>
        {
            // regclassin and regtypein take a number as the oid itself, unchecked.
            Ok(Value::Int(name.parse::<u32>().map_or(0, i64::from)))
        }
        (Value::Text(name), f, SqlType::Regclass) if f.is_text() => {
            let pid = cx.backend.pid();
            let oid =
                crate::pg_catalog::session_relation_oid(cx.tx, name, pid)?.ok_or_else(|| {
                    SqlError::new(
                        SqlState::UNDEFINED_TABLE,
                        format!("relation \"{name}\" does not exist"),
                    )
                })?;
            Ok(Value::Int(i64::from(oid)))
        }
        (Value::Text(name), f, SqlType::Regtype) if f.is_text() => {
            let ty = SqlType::from_name(name.trim()).ok_or_else(|| {
                SqlError::new(
                    SqlState::UNDEFINED_OBJECT,
                    format!("type \"{name}\" does not exist"),
                )
            })?;
            Ok(Value::Int(i64::from(ty.oid())))
        }
        _ => types::cast(v, from, to),
    }
}

/// A `regclass`, `regtype` or `regnamespace` value as its output function prints it (the
/// name it stands for, or the number when nothing has that oid); other values unchanged.
pub(crate) fn reg_output(v: Value, ty: SqlType, cx: &Cx) -> Result<Value> {
    match ty {
        SqlType::Regclass | SqlType::Regtype | SqlType::Regnamespace | SqlType::Regproc
            if !v.is_null() =>
        {
            cast(v, ty, SqlType::Text, cx)
        }
        _ => Ok(v),
    }
}

/// Whether `s` is an oid written as a number (1 to 10 digits).
fn is_oid_text(s: &str) -> bool {
    (1..=10).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit()) && s.parse::<u32>().is_ok()
}

fn subquery(node: &Node, kind: &SubqueryKind, cx: &Cx, row: &[Value]) -> Result<Value> {
    let frame = Frame { row, up: cx.outer };
    let inner = cx.nested(&frame);
    match kind {
        SubqueryKind::Exists => {
            let mut rows = crate::exec::open(node, &inner)?;
            Ok(Value::Bool(rows.next().transpose()?.is_some()))
        }
        SubqueryKind::Scalar => {
            let mut rows = crate::exec::open(node, &inner)?;
            let Some(first) = rows.next().transpose()? else {
                return Ok(Value::Null);
            };
            if rows.next().transpose()?.is_some() {
                return Err(SqlError::new(
                    SqlState::CARDINALITY_VIOLATION,
                    "more than one row returned by a subquery used as an expression",
                ));
            }
            Ok(first.into_iter().next().unwrap_or(Value::Null))
        }
        SubqueryKind::Array(elem) => {
            let mut b = types::array::Builder::default();
            for r in crate::exec::open(node, &inner)? {
                cx.interrupt.check()?;
                let v = r?.into_iter().next().unwrap_or(Value::Null);
                b.push_value(&v, *elem)?;
            }
            Ok(b.finish())
        }
        SubqueryKind::In { expr, negated } => {
            let v = expr.eval(cx, row)?;
            let values: Vec<Value> = crate::exec::open(node, &inner)?
                .map(|r| r.map(|r| r.into_iter().next().unwrap_or(Value::Null)))
                .collect::<Result<_>>()?;
            Ok(in_values(&v, values.iter(), *negated))
        }
    }
}

fn out_of_range_of(ty: SqlType) -> SqlError {
    let name = match ty {
        SqlType::Int2 => "smallint",
        SqlType::Int4 => "integer",
        _ => "bigint",
    };
    SqlError::new(
        SqlState::NUMERIC_VALUE_OUT_OF_RANGE,
        format!("{name} out of range"),
    )
}

fn out_of_range() -> SqlError {
    out_of_range_of(SqlType::Int8)
}

fn division_by_zero() -> SqlError {
    SqlError::new(SqlState::DIVISION_BY_ZERO, "division by zero")
}

/// Arithmetic on two values; `ty` is the result type the binder chose (its range is
/// checked, as PostgreSQL's `int4pl` checks int4's).
pub(crate) fn arith(op: ArithOp, ty: SqlType, left: Value, right: Value) -> Result<Value> {
    Ok(match (left, right) {
        (Value::Null, _) | (_, Value::Null) => Value::Null,
        (Value::Numeric(a), Value::Numeric(b)) => {
            use crate::numeric::Op;
            let op = match op {
                ArithOp::Add => Op::Add,
                ArithOp::Sub => Op::Sub,
                ArithOp::Mul => Op::Mul,
                ArithOp::Div => Op::Div,
                ArithOp::Mod => Op::Mod,
            };
            Value::Numeric(crate::numeric::arith(op, &a, &b)?)
        }
        (Value::Int(a), Value::Int(b)) if !ty.is_float() => {
            if b == 0 && matches!(op, ArithOp::Div | ArithOp::Mod) {
                return Err(division_by_zero());
            }
            let v = match op {
                ArithOp::Add => a.checked_add(b),
                ArithOp::Sub => a.checked_sub(b),
                ArithOp::Mul => a.checked_mul(b),
                ArithOp::Div => a.checked_div(b),
                ArithOp::Mod => a.checked_rem(b),
            }
            .ok_or_else(|| out_of_range_of(ty))?;
            if ty.is_int() {
                types::check_int_range(v, ty).map_err(|_| out_of_range_of(ty))?
            } else {
                Value::Int(v)
            }
        }
        (Value::Timestamp(t), Value::Int(days)) if ty == SqlType::Timestamp => {
            let us = days.checked_mul(86_400_000_000).ok_or_else(out_of_range)?;
            Value::Timestamp(
                match op {
                    ArithOp::Add => t.checked_add(us),
                    ArithOp::Sub => t.checked_sub(us),
                    _ => None,
                }
                .ok_or_else(out_of_range)?,
            )
        }
        (lv, rv) => {
            let (Some(x), Some(y)) = (as_f64(&lv), as_f64(&rv)) else {
                return Err(internal("arithmetic operands"));
            };
            Value::Float(match op {
                ArithOp::Add => x + y,
                ArithOp::Sub => x - y,
                ArithOp::Mul => x * y,
                ArithOp::Div if y == 0.0 => return Err(division_by_zero()),
                ArithOp::Div => x / y,
                ArithOp::Mod => {
                    return Err(SqlError::new(
                        SqlState::UNDEFINED_FUNCTION,
                        "operator does not exist: double precision % double precision",
                    ))
                }
            })
        }
    })
}

/// Steps of a matching loop (LIKE's, a regular expression's) between two interrupt checks.
const MATCH_STEPS_PER_CHECK: usize = 1 << 16;

/// SQL LIKE: `%` any run, `_` one character, `\` escapes the next.
/// `s LIKE pattern`. A pattern ending in a lone escape fails (22025) only when the match
/// reaches it with text left, as PostgreSQL's `MatchText` ('x' LIKE 'x\' is false).
fn like(s: &str, pattern: &str, case_insensitive: bool, interrupt: &Interrupt) -> Result<bool> {
    if case_insensitive {
        like_match(&s.to_lowercase(), &pattern.to_lowercase(), interrupt)
    } else {
        like_match(s, pattern, interrupt)
    }
}

fn like_escape_error() -> SqlError {
    SqlError::new(
        SqlState::INVALID_ESCAPE_SEQUENCE,
        "LIKE pattern must not end with escape character",
    )
}

/// The bytes of the UTF-8 character whose first byte is `lead`.
fn utf8_len(lead: u8) -> usize {
    match lead {
        0..=0x7F => 1,
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        _ => 4,
    }
}

/// LIKE's matching over the texts' bytes (a character compared as its UTF-8 bytes, `_`
/// taking one character), iterative with one backtrack point per `%`: no recursion, no
/// copy of the text, and an interrupt check every [`MATCH_STEPS_PER_CHECK`] steps (the
/// backtracking makes it quadratic at worst).
fn like_match(s: &str, p: &str, interrupt: &Interrupt) -> Result<bool> {
    let (s, p) = (s.as_bytes(), p.as_bytes());
    let (mut si, mut pi) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    let mut steps = 0usize;
    while si < s.len() {
        steps += 1;
        if steps.is_multiple_of(MATCH_STEPS_PER_CHECK) {
            interrupt.check()?;
        }
        let advanced = match p.get(pi) {
            Some(b'%') => {
                star = Some((pi, si));
                pi += 1;
                continue;
            }
            Some(b'_') => {
                si += utf8_len(s[si]);
                pi += 1;
                continue;
            }
            Some(b'\\') => {
                let lead = *p.get(pi + 1).ok_or_else(like_escape_error)?;
                let c = p.get(pi + 1..pi + 1 + utf8_len(lead)).unwrap_or_default();
                s[si..].starts_with(c).then(|| {
                    si += c.len();
                    pi += 1 + c.len();
                })
            }
            Some(&lead) => {
                let c = p.get(pi..pi + utf8_len(lead)).unwrap_or_default();
                s[si..].starts_with(c).then(|| {
                    si += c.len();
                    pi += c.len();
                })
            }
            None => None,
        };
        if advanced.is_some() {
            continue;
        }
        match star {
            Some((sp, ss)) => {
                let next = ss + utf8_len(s[ss]);
                pi = sp + 1;
                si = next;
                star = Some((sp, next));
            }
            None => return Ok(false),
        }
    }
    Ok(p[pi..].iter().all(|&c| c == b'%'))
}

/// The longest pattern a regular expression may have, and the memory for its compiled
/// automaton: the regular-expression functions' ([`crate::func::regex`]).
use crate::func::regex::{
    MAX_PATTERN_BYTES as MAX_REGEX_PATTERN_BYTES, NFA_BYTES as REGEX_NFA_BYTES,
};
/// Memory for a lazy DFA's states.
const REGEX_CACHE_BYTES: usize = 2 << 20;

/// Compiled patterns kept per session thread, most recently used first: PostgreSQL's
/// regexp.c cache (MAX_CACHED_RES), so that `col ~ 'pattern'` compiles its pattern once,
/// not once per row. At most this many; each automaton is at most [`REGEX_NFA_BYTES`].
const REGEX_CACHE_ENTRIES: usize = 16;

/// A pattern compiled: its lazy DFA, or `None` if the DFA cannot take it.
struct Compiled {
    pattern: String,
    case_insensitive: bool,
    dfa: Option<regex_automata::hybrid::dfa::DFA>,
    /// The DFA's states built so far, kept from one match to the next.
    states: std::cell::RefCell<Option<regex_automata::hybrid::dfa::Cache>>,
}

thread_local! {
    static REGEX_CACHE: std::cell::RefCell<std::collections::VecDeque<std::rc::Rc<Compiled>>> =
        const { std::cell::RefCell::new(std::collections::VecDeque::new()) };
}

/// `pattern` compiled, from the cache or built (and cached); 2201B for a pattern that is
/// too long.
fn compiled(pattern: &str, case_insensitive: bool) -> Result<std::rc::Rc<Compiled>> {
    use regex_automata::{hybrid::dfa::DFA, nfa::thompson, util::syntax};
    if pattern.len() > MAX_REGEX_PATTERN_BYTES {
        return Err(SqlError::new(
            SqlState::INVALID_REGULAR_EXPRESSION,
            "invalid regular expression: pattern too long",
        ));
    }
    let hit = REGEX_CACHE.with_borrow_mut(|cache| {
        let at = cache
            .iter()
            .position(|c| c.pattern == pattern && c.case_insensitive == case_insensitive)?;
        let entry = cache.remove(at)?;
        cache.push_front(std::rc::Rc::clone(&entry));
        Some(entry)
    });
    if let Some(entry) = hit {
        return Ok(entry);
    }
    // `.` matches a newline, as in PostgreSQL (not newline-sensitive by default).
    let dfa = DFA::builder()
        .syntax(
            syntax::Config::new()
                .case_insensitive(case_insensitive)
                .dot_matches_new_line(true),
        )
        .thompson(thompson::Config::new().nfa_size_limit(Some(REGEX_NFA_BYTES)))
        .configure(
            DFA::config()
                .cache_capacity(REGEX_CACHE_BYTES)
                .minimum_cache_clear_count(None),
        )
        .build(pattern)
        .ok();
    let states = std::cell::RefCell::new(dfa.as_ref().map(DFA::create_cache));
    let entry = std::rc::Rc::new(Compiled {
        pattern: pattern.to_string(),
        case_insensitive,
        dfa,
        states,
    });
    REGEX_CACHE.with_borrow_mut(|cache| {
        cache.push_front(std::rc::Rc::clone(&entry));
        cache.truncate(REGEX_CACHE_ENTRIES);
    });
    Ok(entry)
}

/// `s ~ pattern`: a lazy DFA walked a byte at a time, the interrupt checked every
/// [`MATCH_STEPS_PER_CHECK`] bytes, so that a match over a large text can be stopped. A
/// pattern the DFA cannot take (a Unicode word boundary) is matched by `regex_lite` in one
/// call, which nothing interrupts; an invalid pattern is 2201B with `regex_lite`'s message.
fn regex_match(
    s: &str,
    pattern: &str,
    case_insensitive: bool,
    interrupt: &Interrupt,
) -> Result<bool> {
    let compiled = compiled(pattern, case_insensitive)?;
    if let (Some(dfa), Ok(mut states)) = (&compiled.dfa, compiled.states.try_borrow_mut()) {
        let states = states.get_or_insert_with(|| dfa.create_cache());
        if let Some(found) = dfa_is_match(dfa, states, s.as_bytes(), interrupt)? {
            return Ok(found);
        }
    }
    let flags = crate::func::regex::Flags {
        case_insensitive,
        ..Default::default()
    };
    Ok(crate::func::regex::lite(pattern, flags)?.is_match(s))
}

/// Whether `dfa` matches somewhere in `hay`; `None` if the DFA gave up (it cannot decide
/// with what it was built with).
fn dfa_is_match(
    dfa: &regex_automata::hybrid::dfa::DFA,
    cache: &mut regex_automata::hybrid::dfa::Cache,
    hay: &[u8],
    interrupt: &Interrupt,
) -> Result<Option<bool>> {
    let Ok(mut sid) = dfa.start_state_forward(cache, &regex_automata::Input::new(hay)) else {
        return Ok(None);
    };
    for (i, &b) in hay.iter().enumerate() {
        if i % MATCH_STEPS_PER_CHECK == MATCH_STEPS_PER_CHECK - 1 {
            interrupt.check()?;
        }
        let Ok(next) = dfa.next_state(cache, sid, b) else {
            return Ok(None);
        };
        sid = next;
        if sid.is_tagged() {
            if sid.is_match() {
                return Ok(Some(true));
            }
            if sid.is_dead() {
                return Ok(Some(false));
            }
            if sid.is_quit() {
                return Ok(None);
            }
        }
    }
    Ok(dfa
        .next_eoi_state(cache, sid)
        .ok()
        .map(|sid| sid.is_match()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::func::Func;
    use crate::nodes::dismantle;

    fn l(s: &str, p: &str) -> bool {
        like(s, p, false, &Interrupt::default()).unwrap()
    }

    #[test]
    fn like_matches_percent_underscore_and_escapes() {
        assert!(l("pgbench_accounts", "pgbench%"));
        assert!(l("abc", "a_c"));
        assert!(!l("abc", "a_"));
        assert!(l("a%c", "a\\%c"));
        assert!(!l("abc", "a\\%c"));
        assert!(l("", "%"));
        assert!(l("xaaay", "x%a%y"));
        assert!(!l("xaaaz", "x%a%y"));
        let none = Interrupt::default();
        assert!(like("ABC", "a%", true, &none).unwrap());
        // A lone trailing escape fails only when reached with text left (PostgreSQL).
        assert!(!like("a", "a\\", false, &none).unwrap());
        assert_eq!(
            like("ab", "a\\", false, &none).unwrap_err().sqlstate(),
            "22025"
        );
        assert!(l("héllo wörld", "h_llo w%d"));
        assert!(!l("héllo", "h_lo"));
        assert!(l("a\\b", "a\\\\b"));
    }

    /// Trees far deeper than a small stack could drop by recursion go without harm: a
    /// million nested expressions and a hundred thousand nested plan nodes (each holding an
    /// expression with a subquery) on a thread of 256 KiB.
    #[test]
    fn deep_trees_drop_without_recursion() {
        std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(|| {
                let mut e = Expr::Column(0);
                for i in 0..1_000_000 {
                    e = match i % 3 {
                        0 => Expr::Neg(Box::new(e)),
                        1 => Expr::Func(Func::Abs, vec![e, Expr::Param(1)]),
                        _ => Expr::Arith(
                            ArithOp::Add,
                            SqlType::Int8,
                            Box::new(e),
                            Box::new(Expr::Param(0)),
                        ),
                    };
                }
                drop(e);
                let mut n = Node::empty();
                for _ in 0..100_000 {
                    let pred = Expr::Subquery(
                        Box::new(Node::Values(vec![vec![Expr::Param(0)]])),
                        SubqueryKind::Exists,
                    );
                    n = Node::Filter {
                        input: Box::new(n),
                        pred: Expr::Not(Box::new(pred)),
                    };
                }
                let deep_subqueries = (0..100_000).fold(Expr::Param(0), |e, _| {
                    Expr::Subquery(
                        Box::new(Node::Project {
                            input: Box::new(Node::empty()),
                            exprs: vec![e],
                        }),
                        SubqueryKind::Scalar,
                    )
                });
                // Wide, too: a VALUES of a million rows each with an inner expression
                // (a column's DEFAULT), under an APPEND of as many inputs.
                let row = || vec![Expr::Neg(Box::new(Expr::Param(0))), Expr::Param(1)];
                let values = Node::Values((0..1_000_000).map(|_| row()).collect());
                let mut append = Node::Append(vec![
                    values,
                    Node::Project {
                        input: Box::new(Node::empty()),
                        exprs: (0..100_000)
                            .map(|_| Expr::Not(Box::new(Expr::Param(0))))
                            .collect(),
                    },
                ]);
                let mut pending = Vec::new();
                append.take_children(&mut pending);
                let most = dismantle(pending);
                assert!(most < 10, "{most} parts waited at once");
                drop((n, deep_subqueries));
            })
            .unwrap()
            .join()
            .expect("dropped without overflowing 256 KiB");
    }

    #[test]
    fn in_lists_follow_sql_null_rules() {
        let one = Value::Int(1);
        let vals = [Value::Int(2), Value::Null];
        assert_eq!(in_values(&one, vals.iter(), false), Value::Null);
        let vals = [Value::Int(1), Value::Null];
        assert_eq!(in_values(&one, vals.iter(), false), Value::Bool(true));
        let vals = [Value::Int(2)];
        assert_eq!(in_values(&one, vals.iter(), true), Value::Bool(true));
    }

    #[test]
    fn arithmetic_checks_the_result_type_range() {
        let e = arith(
            ArithOp::Add,
            SqlType::Int4,
            Value::Int(i64::from(i32::MAX)),
            Value::Int(1),
        )
        .unwrap_err();
        assert_eq!(e.message(), "integer out of range");
        assert_eq!(
            arith(ArithOp::Div, SqlType::Int4, Value::Int(1), Value::Int(0))
                .unwrap_err()
                .sqlstate(),
            "22012"
        );
        assert_eq!(
            arith(
                ArithOp::Div,
                SqlType::Float8,
                Value::Int(1),
                Value::Float(4.0)
            )
            .unwrap(),
            Value::Float(0.25)
        );
    }
}
