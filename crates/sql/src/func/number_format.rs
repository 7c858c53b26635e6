//! `to_char` of numbers: PostgreSQL's numeric template patterns (`formatting.c`'s NUM
//! keywords): `9`, `0`, `.`/`D`, `,`/`G`, `S`, `MI`, `PL`, `SG`, `PR`, `L`, `V`, `EEEE`,
//! `RN`, `TH` and `FM`, in the C locale (decimal point `.`, group separator `,`, no
//! currency symbol).
//!
//! ## Rules
//! - The value is rounded to the template's digits after the point (after `V`'s shift);
//!   one with more digits before the point than the template has is all `#`.
//! - Without `S`, `MI`, `PL`, `SG` or `PR` one place is kept for the sign, written just
//!   before the first digit (`-12` in `9999` is `  -12`); `FM` drops blanks and trailing
//!   zeros after the point.
//! - The processing follows PostgreSQL's `NUM_processor` step by step, so its corner cases
//!   (`9.9` of `0.1` is ` .1`, `FM9.9` of `0` is `0.`) come out the same.

use std::fmt::Write as _;

use quire_engine::{Numeric, SqlState, Value};

use crate::error::{Result, SqlError};
use crate::numeric;

/// The longest template read.
const MAX_TEMPLATE_CHARS: usize = 1024;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Key {
    Nine,
    Zero,
    Dec,
    Comma,
    Fm,
    S,
    Mi,
    Pl,
    Sg,
    Pr,
    L,
    V,
    Eeee,
    Rn { lower: bool },
    Th { lower: bool },
}

enum Node {
    Key(Key),
    Text(char),
}

/// Where `S` stands: before the number, after it, or nowhere.
#[derive(Clone, Copy, PartialEq, Eq)]
enum LSign {
    None,
    Pre,
    Post,
}

/// The template's description (PostgreSQL's `NUMDesc`, its flags as bools).
#[allow(clippy::struct_excessive_bools)]
struct Desc {
    pre: usize,
    post: usize,
    decimal: bool,
    zero: bool,
    zero_start: usize,
    zero_end: usize,
    fill: bool,
    lsign: LSign,
    pre_lsign_num: usize,
    minus: bool,
    plus: bool,
    bracket: bool,
    roman: bool,
    multi: bool,
    multi_digits: u32,
    eeee: bool,
}

fn bad_format(message: &str) -> SqlError {
    SqlError::new(SqlState::SYNTAX_ERROR, message.to_string())
}

const KEYS: &[(&str, Key)] = &[
    ("EEEE", Key::Eeee),
    ("eeee", Key::Eeee),
    ("FM", Key::Fm),
    ("fm", Key::Fm),
    ("MI", Key::Mi),
    ("mi", Key::Mi),
    ("PL", Key::Pl),
    ("pl", Key::Pl),
    ("SG", Key::Sg),
    ("sg", Key::Sg),
    ("PR", Key::Pr),
    ("pr", Key::Pr),
    ("RN", Key::Rn { lower: false }),
    ("rn", Key::Rn { lower: true }),
    ("TH", Key::Th { lower: false }),
    ("th", Key::Th { lower: true }),
    ("9", Key::Nine),
    ("0", Key::Zero),
    (".", Key::Dec),
    ("D", Key::Dec),
    ("d", Key::Dec),
    (",", Key::Comma),
    ("G", Key::Comma),
    ("g", Key::Comma),
    ("S", Key::S),
    ("s", Key::S),
    ("L", Key::L),
    ("l", Key::L),
    ("V", Key::V),
    ("v", Key::V),
];

fn parse_template(t: &str) -> Result<(Vec<Node>, Desc)> {
    if t.chars().count() > MAX_TEMPLATE_CHARS {
        return Err(SqlError::new(
            SqlState::PROGRAM_LIMIT_EXCEEDED,
            "to_char template is too long",
        ));
    }
    let mut d = Desc {
        pre: 0,
        post: 0,
        decimal: false,
        zero: false,
        zero_start: 0,
        zero_end: 0,
        fill: false,
        lsign: LSign::None,
        pre_lsign_num: 0,
        minus: false,
        plus: false,
        bracket: false,
        roman: false,
        multi: false,
        multi_digits: 0,
        eeee: false,
    };
    let mut nodes = Vec::new();
    let mut rest = t;
    while let Some(c) = rest.chars().next() {
        // `"quoted text"` is copied without its quotes, `\"` a quote inside or out.
        if c == '"' {
            let mut escaped = false;
            let mut end = rest.len();
            for (i, q) in rest.char_indices().skip(1) {
                if escaped {
                    nodes.push(Node::Text(q));
                    escaped = false;
                } else if q == '\\' {
                    escaped = true;
                } else if q == '"' {
                    end = i + 1;
                    break;
                } else {
                    nodes.push(Node::Text(q));
                }
            }
            rest = &rest[end..];
            continue;
        }
        if c == '\\' && rest[1..].starts_with('"') {
            nodes.push(Node::Text('"'));
            rest = &rest[2..];
            continue;
        }
        let Some((text, key)) = KEYS.iter().find(|(k, _)| rest.starts_with(k)) else {
            nodes.push(Node::Text(c));
            rest = &rest[c.len_utf8()..];
            continue;
        };
        describe(&mut d, *key)?;
        nodes.push(Node::Key(*key));
        rest = &rest[text.len()..];
    }
    if d.eeee && (d.roman || d.bracket || d.lsign != LSign::None || d.minus || d.plus || d.multi) {
        return Err(bad_format("\"EEEE\" is incompatible with other formats"));
    }
    Ok((nodes, d))
}

/// PostgreSQL's `NUMDesc_prepare`: what one keyword adds to the description.
fn describe(d: &mut Desc, key: Key) -> Result<()> {
    match key {
        Key::Nine => {
            if d.bracket {
                return Err(bad_format("\"9\" must be ahead of \"PR\""));
            }
            if d.multi {
                d.multi_digits += 1;
            } else if d.decimal {
                d.post += 1;
            } else {
                d.pre += 1;
            }
        }
        Key::Zero => {
            if d.bracket {
                return Err(bad_format("\"0\" must be ahead of \"PR\""));
            }
            if !d.zero && !d.decimal {
                d.zero = true;
                d.zero_start = d.pre + 1;
            }
            if d.decimal {
                d.post += 1;
            } else {
                d.pre += 1;
            }
            d.zero_end = d.pre + d.post;
        }
        Key::Dec => {
            if d.decimal {
                return Err(bad_format("multiple decimal points"));
            }
            if d.multi {
                return Err(bad_format("cannot use \"V\" and decimal point together"));
            }
            d.decimal = true;
        }
        Key::Fm => d.fill = true,
        Key::S => {
            if d.lsign != LSign::None {
                return Err(bad_format("cannot use \"S\" twice"));
            }
            if d.plus || d.minus || d.bracket {
                return Err(bad_format(
                    "cannot use \"S\" and \"PL\"/\"MI\"/\"SG\"/\"PR\" together",
                ));
            }
            if d.decimal {
                d.lsign = LSign::Post;
            } else {
                d.lsign = LSign::Pre;
                d.pre_lsign_num = d.pre;
            }
        }
        Key::Mi | Key::Pl | Key::Sg => {
            if d.lsign != LSign::None {
                return Err(bad_format("cannot use \"S\" and \"MI\" together"));
            }
            d.minus |= matches!(key, Key::Mi | Key::Sg);
            d.plus |= matches!(key, Key::Pl | Key::Sg);
        }
        Key::Pr => {
            if d.lsign != LSign::None || d.plus || d.minus {
                return Err(bad_format(
                    "cannot use \"PR\" and \"S\"/\"PL\"/\"MI\"/\"SG\" together",
                ));
            }
            d.bracket = true;
        }
        Key::Rn { .. } => d.roman = true,
        Key::V => {
            if d.decimal {
                return Err(bad_format("cannot use \"V\" and decimal point together"));
            }
            d.multi = true;
        }
        Key::Eeee => {
            if d.eeee {
                return Err(bad_format("cannot use \"EEEE\" twice"));
            }
            d.eeee = true;
        }
        Key::L | Key::Comma | Key::Th { .. } => {}
    }
    Ok(())
}

/// `to_char(number, template)`.
pub(crate) fn to_char(v: &Value, template: &str) -> Result<String> {
    let (nodes, mut d) = parse_template(template)?;
    let n = match v {
        Value::Int(i) => numeric::from_i64(*i),
        Value::Float(f) if f.is_nan() => Numeric::special(quire_engine::NumericSpecial::NaN),
        Value::Float(f) if f.is_infinite() => Numeric::special(if *f > 0.0 {
            quire_engine::NumericSpecial::PosInf
        } else {
            quire_engine::NumericSpecial::NegInf
        }),
        // A float is shifted by `V` before it is rounded, and `EEEE` reads all its digits.
        Value::Float(f) if d.eeee => numeric::from_f64(*f)?,
        Value::Float(f) if d.multi => {
            let shifted = f * 10f64.powi(i32::try_from(d.multi_digits).unwrap_or(0));
            d.pre += d.multi_digits as usize;
            d.multi = false;
            float_numeric(shifted, &d)?
        }
        Value::Float(f) => float_numeric(*f, &d)?,
        Value::Numeric(n) => n.clone(),
        _ => return Err(SqlError::internal("bad to_char argument in a bound plan")),
    };
    if d.roman {
        return Ok(roman(&n, &nodes, d.fill));
    }
    if d.eeee {
        return scientific(&n, &d);
    }
    let mut n = n;
    if d.multi {
        let shift = numeric::parse(&format!("1{}", "0".repeat(d.multi_digits as usize)))?;
        n = numeric::arith(numeric::Op::Mul, &n, &shift)?;
        d.pre += d.multi_digits as usize;
    }
    let (sign, digits, pre_spaces) = digits_of(&n, &d)?;
    Ok(process(&nodes, &d, sign, &digits, pre_spaces))
}

/// A float8 as the numeric `to_char` rounds: at most 15 significant digits, as PostgreSQL's
/// `float8_to_char` prints it.
fn float_numeric(f: f64, d: &Desc) -> Result<Numeric> {
    let int_len = format!("{:.0}", f.abs()).len();
    let post = if int_len >= 15 {
        0
    } else {
        d.post.min(15 - int_len)
    };
    numeric::parse(&format!("{f:.post$}"))
}

/// The sign, the digits (`123.45`, rounded to the template's), and how many places before
/// the point stay blank; all `#` when the number does not fit.
fn digits_of(n: &Numeric, d: &Desc) -> Result<(char, String, usize)> {
    let overflow = |d: &Desc| {
        let mut s = "#".repeat(d.pre + d.post + 1);
        s.replace_range(d.pre..=d.pre, ".");
        s
    };
    if n.as_special().is_some() {
        return Ok(('+', overflow(d), 0));
    }
    let rounded = numeric::round(n, i64::try_from(d.post).unwrap_or(0))?;
    let text = rounded.to_string();
    let (sign, body) = match text.strip_prefix('-') {
        Some(b) => ('-', b.to_string()),
        None => ('+', text),
    };
    let pre_len = body.find('.').unwrap_or(body.len());
    if pre_len > d.pre {
        return Ok((sign, overflow(d), 0));
    }
    let body = if d.post > 0 && !body.contains('.') {
        format!("{body}.{}", "0".repeat(d.post))
    } else {
        body
    };
    Ok((sign, body, d.pre - pre_len))
}

/// The position of the last digit after the point that is not a zero (the point's own
/// position if all are), PostgreSQL's `get_last_relevant_decnum`.
fn last_relevant(number: &[u8]) -> Option<usize> {
    let dot = number.iter().position(|&b| b == b'.')?;
    let mut last = dot;
    for (i, &b) in number.iter().enumerate().skip(dot + 1) {
        if b != b'0' {
            last = i;
        }
    }
    Some(last)
}

/// State of PostgreSQL's `NUMProc` while it writes.
struct Proc<'a> {
    d: &'a Desc,
    number: &'a [u8],
    at: usize,
    sign: char,
    sign_wrote: bool,
    num_in: bool,
    num_curr: usize,
    num_count: usize,
    pre_spaces: usize,
    last_relevant: Option<usize>,
    lsign: LSign,
    /// The first `0` place, counted from 0 (the description counts from 1).
    zero_start: usize,
    out: String,
}

fn process(nodes: &[Node], d: &Desc, sign: char, digits: &str, pre_spaces: usize) -> String {
    let mut p = Proc {
        d,
        number: digits.as_bytes(),
        at: 0,
        sign,
        sign_wrote: false,
        num_in: false,
        num_curr: 0,
        num_count: 0,
        pre_spaces,
        last_relevant: None,
        lsign: d.lsign,
        zero_start: d.zero_start.saturating_sub(1),
        out: String::with_capacity(nodes.len() + 8),
    };
    let mut bracket = d.bracket;
    if d.plus || d.minus {
        p.sign_wrote = !d.plus || d.minus;
    } else {
        if sign != '-' && d.fill {
            bracket = false;
        }
        p.sign_wrote = sign == '+' && d.fill && d.lsign == LSign::None;
        if d.lsign == LSign::Pre && d.pre == d.pre_lsign_num {
            p.lsign = LSign::Post;
        }
    }
    p.num_count = d.post + d.pre;
    p.num_count = p.num_count.saturating_sub(1);
    if d.fill && d.decimal {
        p.last_relevant = last_relevant(p.number);
        if let Some(last) = p.last_relevant {
            if d.zero_end > pre_spaces {
                let last_zero = (p.number.len() - 1).min(d.zero_end - pre_spaces);
                p.last_relevant = Some(last.max(last_zero));
            }
        }
    }
    if !p.sign_wrote && pre_spaces == 0 {
        p.num_count += 1;
    }
    for node in nodes {
        match node {
            Node::Text(c) => p.out.push(*c),
            Node::Key(k) => p.key(*k, bracket),
        }
    }
    p.out
}

impl Proc<'_> {
    fn cur(&self) -> u8 {
        self.number.get(self.at).copied().unwrap_or(0)
    }

    fn last_is_point(&self) -> bool {
        self.last_relevant.is_some_and(|i| self.number[i] == b'.')
    }

    /// PostgreSQL's `IS_PREDEC_SPACE`: the leading `0` of `0.5` under a `9`.
    fn predec_space(&self) -> bool {
        !self.d.zero && self.at == 0 && self.number.first() == Some(&b'0') && self.d.post != 0
    }

    fn key(&mut self, k: Key, bracket: bool) {
        match k {
            Key::Nine | Key::Zero | Key::Dec => self.numpart(k, bracket),
            Key::Comma => {
                if self.num_in {
                    self.out.push(',');
                } else if !self.d.fill {
                    self.out.push(' ');
                }
            }
            // C locale: no currency symbol, a blank in its place.
            Key::L => self.out.push(' '),
            Key::Th { lower } => {
                let integral = !self.number.contains(&b'.') && self.number.first() != Some(&b'#');
                if self.sign != '-' && integral {
                    let n: i64 = std::str::from_utf8(self.number)
                        .ok()
                        .and_then(|s| s.parse().ok())
                        .unwrap_or(0);
                    super::to_char::push_ordinal(&mut self.out, n, !lower);
                }
            }
            Key::Mi => self.sign_char('-', self.sign == '-'),
            Key::Pl => self.sign_char('+', self.sign == '+'),
            Key::Sg => self.out.push(self.sign),
            Key::Fm | Key::S | Key::Pr | Key::V | Key::Eeee | Key::Rn { .. } => {}
        }
    }

    fn sign_char(&mut self, c: char, applies: bool) {
        if applies {
            self.out.push(c);
        } else if !self.d.fill {
            self.out.push(' ');
        }
    }

    /// PostgreSQL's `NUM_numpart_to_char`: one digit place of the template.
    fn numpart(&mut self, k: Key, bracket: bool) {
        let d = self.d;
        let zero_start = self.zero_start;
        let may_sign = self.num_curr >= self.pre_spaces || (d.zero && zero_start == self.num_curr);
        if !self.sign_wrote && may_sign && (!self.predec_space() || self.last_is_point()) {
            self.write_sign(bracket);
        }
        if self.num_curr < self.pre_spaces && (zero_start > self.num_curr || !d.zero) {
            if !d.fill {
                self.out.push(' ');
            }
        } else if d.zero && self.num_curr < self.pre_spaces && zero_start <= self.num_curr {
            self.out.push('0');
            self.num_in = true;
        } else {
            self.digit(k);
        }
        let mut end = self.num_count + usize::from(self.pre_spaces > 0) + usize::from(d.decimal);
        if self.last_relevant.is_some_and(|l| l == self.at) {
            end = self.num_curr;
        }
        if self.num_curr + 1 == end {
            if self.sign_wrote && bracket {
                self.out.push(if self.sign == '+' { ' ' } else { '>' });
            } else if self.lsign == LSign::Post {
                self.out.push(self.sign);
            }
        }
        self.num_curr += 1;
    }

    fn write_sign(&mut self, bracket: bool) {
        if self.lsign != LSign::None {
            if self.lsign == LSign::Pre {
                self.out.push(self.sign);
                self.sign_wrote = true;
            }
        } else if bracket {
            self.out.push(if self.sign == '+' { ' ' } else { '<' });
            self.sign_wrote = true;
        } else if self.sign == '+' {
            if !self.d.fill {
                self.out.push(' ');
            }
            self.sign_wrote = true;
        } else {
            self.out.push('-');
            self.sign_wrote = true;
        }
    }

    /// A digit or the point from the number, or a blank for a zero not to print.
    fn digit(&mut self, k: Key) {
        let c = self.cur();
        if c == b'.' {
            if !self.last_is_point() || self.d.fill {
                self.out.push('.');
            }
        } else if self.last_relevant.is_some_and(|l| self.at > l) && k != Key::Zero {
        } else if self.predec_space() {
            if !self.d.fill {
                self.out.push(' ');
            } else if self.last_is_point() {
                self.out.push('0');
            }
        } else if c != 0 {
            self.out.push(char::from(c));
            self.num_in = true;
        }
        if c != 0 {
            self.at += 1;
        }
    }
}

/// `RN`: the number rounded to an integer in Roman numerals, 15 places wide unless FM;
/// `#` beyond 1 to 3999.
fn roman(n: &Numeric, nodes: &[Node], fill: bool) -> String {
    let lower = nodes
        .iter()
        .any(|k| matches!(k, Node::Key(Key::Rn { lower: true })));
    let v = numeric::round(n, 0)
        .ok()
        .and_then(|r| numeric::to_i64(&r, "integer").ok().flatten())
        .filter(|v| (1..=3999).contains(v));
    let Some(mut v) = v else {
        return "#".repeat(15);
    };
    let mut s = String::new();
    for (value, numeral) in [
        (1000, "M"),
        (900, "CM"),
        (500, "D"),
        (400, "CD"),
        (100, "C"),
        (90, "XC"),
        (50, "L"),
        (40, "XL"),
        (10, "X"),
        (9, "IX"),
        (5, "V"),
        (4, "IV"),
        (1, "I"),
    ] {
        while v >= value {
            s.push_str(numeral);
            v -= value;
        }
    }
    if lower {
        s = s.to_ascii_lowercase();
    }
    if fill {
        s
    } else {
        format!("{s:>15}")
    }
}

/// `EEEE`: `d.dddde+nn` with the template's digits after the point, a blank before a
/// positive number; `#` for NaN and the infinities.
fn scientific(n: &Numeric, d: &Desc) -> Result<String> {
    if n.as_special().is_some() {
        let mut s = "#".repeat(d.pre + d.post + 6);
        s.replace_range(0..1, " ");
        s.replace_range(d.pre + 1..=d.pre + 1, ".");
        return Ok(s);
    }
    let text = n.to_string();
    let negative = text.starts_with('-');
    let digits: String = text.chars().filter(char::is_ascii_digit).collect();
    let point = text
        .trim_start_matches('-')
        .find('.')
        .unwrap_or(text.len() - usize::from(negative));
    let first = digits.find(|c| c != '0');
    let Some(first) = first else {
        let mut s = String::from(" 0");
        if d.post > 0 {
            let _ = write!(s, ".{}", "0".repeat(d.post));
        }
        s.push_str("e+00");
        return Ok(s);
    };
    let exp = i64::try_from(point).unwrap_or(0) - i64::try_from(first).unwrap_or(0) - 1;
    // The mantissa's digits, rounded half away from zero to `post` places.
    let mantissa = format!("{}.{}", &digits[first..=first], &digits[first + 1..]);
    let m = numeric::round(
        &numeric::parse(&mantissa)?,
        i64::try_from(d.post).unwrap_or(0),
    )?;
    let (m, exp) = if m.to_string().starts_with("10") {
        let again = numeric::parse(&format!("1.{}", &digits[first..]))?;
        (
            numeric::round(&again, i64::try_from(d.post).unwrap_or(0))?,
            exp + 1,
        )
    } else {
        (m, exp)
    };
    let sign = if negative { '-' } else { ' ' };
    let esign = if exp < 0 { '-' } else { '+' };
    Ok(format!("{sign}{m}e{esign}{:02}", exp.abs()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(v: &str, t: &str) -> String {
        to_char(&Value::Numeric(numeric::parse(v).unwrap()), t).unwrap()
    }

    #[test]
    fn templates() {
        assert_eq!(c("-12", "9999"), "  -12");
        assert_eq!(c("12", "0000"), " 0012");
        assert_eq!(c("-12", "FM9999"), "-12");
        assert_eq!(c("1.5", "FM99.99"), "1.5");
        assert_eq!(c("0.1", "9.9"), "  .1");
        assert_eq!(c("0", "FM9.9"), "0.");
        assert_eq!(c("12345.678", "99,999.99"), " 12,345.68");
        assert_eq!(c("123456", "999"), " ###");
        assert_eq!(c("-5", "999PR"), "  <5>");
        assert_eq!(c("5", "S999"), "  +5");
        assert_eq!(c("485", "RN"), "        CDLXXXV");
        assert_eq!(c("12.5", "9.99EEEE"), " 1.25e+01");
        assert_eq!(c("3", "FM9th"), "3rd");
    }
}
