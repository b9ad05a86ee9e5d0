//! A reader of the plain block-style YAML that `kubectl get -o yaml`, serde_yaml_ng and most
//! generators write, several times faster than the full YAML parser: one line per mapping
//! entry or sequence item, plain or single-quoted scalars on the key's line, `{}` and `[]`.
//!
//! It is a deserializer that gives exactly what `serde_yaml_ng`'s `deserialize_any` gives for
//! the same document (mappings, sequences and scalars resolved as serde_yaml_ng resolves
//! them), and only that: the reader above it (the manifest's strict reader, which asks for
//! any value and for mapping keys as strings) never asks it anything else. Whatever it is not
//! sure to read exactly so — a block scalar, a multi-line or double-quoted scalar with
//! escapes, a flow collection with content, an anchor, a tag, a comment after a value, a
//! tab, a byte outside printable ASCII, a plain scalar that might be a number, more nested
//! collections or a longer key than serde_yaml_ng accepts — is an error ([`Unsure`]), and
//! the caller reads that document with the full parser instead.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// The document is not one this reader is sure to read as the full parser does (or it is
/// invalid): read it with the full parser.
#[derive(Debug)]
pub(crate) struct Unsure;

impl fmt::Display for Unsure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not plain block YAML")
    }
}

impl std::error::Error for Unsure {}

impl de::Error for Unsure {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Unsure
    }
}

/// One line with content: its indentation and the text after it (without the line break;
/// for the first line of a compact mapping in a sequence item, the text after `- `).
#[derive(Clone, Copy)]
struct Line<'a> {
    indent: usize,
    text: &'a str,
}

/// serde_yaml_ng refuses a document with more nested mappings and sequences than this (its
/// recursion limit); the block reader leaves such a document to it.
const MAX_DEPTH: usize = 128;

/// libyaml reads a plain key only when its `:` comes at most this many characters after
/// the key's start; a longer key is left to it.
const MAX_KEY_LEN: usize = 1024;

/// The lines of one document, and the next one to read.
pub(crate) struct Cursor<'a> {
    lines: Vec<Line<'a>>,
    next: usize,
    /// How many mappings and sequences enclose the node being read.
    depth: usize,
}

impl<'a> Cursor<'a> {
    /// The lines of a document's text (without its `---` line). `Unsure` when the text has a
    /// byte other than printable ASCII and line breaks, or a line break other than `\n`.
    pub(crate) fn new(text: &'a str) -> Result<Self, Unsure> {
        if !text.bytes().all(|b| b == b'\n' || (0x20..0x7f).contains(&b)) {
            return Err(Unsure);
        }
        let mut lines = Vec::new();
        for raw in text.split('\n') {
            let body = raw.trim_start_matches(' ');
            // Blank lines and whole-line comments carry nothing.
            if body.is_empty() || body.starts_with('#') {
                continue;
            }
            lines.push(Line { indent: raw.len() - body.len(), text: body.trim_end_matches(' ') });
        }
        Ok(Cursor { lines, next: 0, depth: 0 })
    }

    fn peek(&self) -> Option<Line<'a>> {
        self.lines.get(self.next).copied()
    }

    /// Reads the whole document with `seed`; every line must be read.
    pub(crate) fn read<T: DeserializeSeed<'a>>(mut self, seed: T) -> Result<T::Value, Unsure> {
        let node = match self.peek() {
            None => Node::Null,
            Some(line) => Node::Block(line.indent),
        };
        let value = seed.deserialize(NodeDe { cur: &mut self, node })?;
        if self.next != self.lines.len() {
            return Err(Unsure);
        }
        Ok(value)
    }
}

/// `- ` (or a lone `-`): a block sequence item; the text after it.
fn item(text: &str) -> Option<&str> {
    if text == "-" {
        Some("")
    } else {
        text.strip_prefix("- ").map(|rest| rest.trim_start_matches(' '))
    }
}

/// `key:` or `key: value` with a plain key of the characters of Kubernetes field names,
/// label keys and resource names (at most [`MAX_KEY_LEN`] of them): the key and the text
/// after it.
fn entry(text: &str) -> Option<(&str, &str)> {
    let bytes = text.as_bytes();
    let end = bytes.iter().position(|&b| !(b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'/' | b'-')))?;
    if end == 0 || end > MAX_KEY_LEN || bytes[0] == b'-' || bytes[end] != b':' {
        return None;
    }
    let rest = &text[end + 1..];
    if rest.is_empty() {
        Some((&text[..end], ""))
    } else {
        rest.strip_prefix(' ').map(|r| (&text[..end], r.trim_start_matches(' ')))
    }
}

/// Where a node is.
#[derive(Clone, Copy)]
enum Node<'a> {
    /// No node: an empty value (`key:` with nothing under it), null as YAML reads it.
    Null,
    /// On the line of its key or `- `: this text.
    Inline(&'a str),
    /// A block mapping or sequence whose lines have this indentation.
    Block(usize),
}

struct NodeDe<'a, 'c> {
    cur: &'c mut Cursor<'a>,
    node: Node<'a>,
}

/// A scalar written on one line, resolved as serde_yaml_ng resolves it.
enum Scalar<'a> {
    Null,
    Bool(bool),
    U64(u64),
    I64(i64),
    Str(Cow<'a, str>),
}

/// Reads a value written on the line of its key or `- `.
fn inline(text: &str) -> Result<Result<Scalar<'_>, bool>, Unsure> {
    // `Err(true)`: an empty mapping `{}`; `Err(false)`: an empty sequence `[]`.
    match text {
        "{}" => return Ok(Err(true)),
        "[]" => return Ok(Err(false)),
        _ => {}
    }
    let bytes = text.as_bytes();
    if let Some(inner) = text.strip_prefix('\'') {
        // Single-quoted: `''` is a quote; the closing quote ends the line.
        let body = inner.strip_suffix('\'').ok_or(Unsure)?;
        if body.replace("''", "").contains('\'') {
            return Err(Unsure);
        }
        return Ok(Ok(Scalar::Str(if body.contains("''") {
            Cow::Owned(body.replace("''", "'"))
        } else {
            Cow::Borrowed(body)
        })));
    }
    if let Some(inner) = text.strip_prefix('"') {
        // Double-quoted without escapes.
        let body = inner.strip_suffix('"').ok_or(Unsure)?;
        if body.contains(['"', '\\']) {
            return Err(Unsure);
        }
        return Ok(Ok(Scalar::Str(Cow::Borrowed(body))));
    }
    // A plain scalar: no indicator first, no comment, no mapping inside.
    let first = bytes[0];
    let spaced = bytes.get(1).is_none_or(|b| *b == b' ');
    if matches!(first, b',' | b'[' | b']' | b'{' | b'}' | b'#' | b'&' | b'*' | b'!' | b'|' | b'>' | b'%' | b'@' | b'`')
        || (matches!(first, b'-' | b'?' | b':') && spaced)
        || text.contains('#')
        || text.contains(": ")
        || text.ends_with(':')
    {
        return Err(Unsure);
    }
    plain(text).map(Ok)
}

/// A plain scalar resolved: null, booleans and decimal integers as serde_yaml_ng reads
/// them, and text that cannot be a number; any other spelling that might be a number
/// (`1e3`, `0x1f`, `.5`, `.inf`, `+1`, `007`, …) is left to the full parser.
///
/// serde_yaml_ng (YAML 1.2's core schema: `yes`, `on`, `y` are text) reads a number only
/// from a text that starts, after one optional sign, with a digit or a point: integers in
/// decimal or after `0x`, `0o`, `0b` (a sign before them), what Rust's float parser reads
/// after one optional `+` (finite only), and `.inf`, `.nan` in three spellings each. So a
/// text whose first character after the sign is neither is text, and so is one that starts
/// with a digit, has no radix prefix and that Rust's float parser refuses (`64Gi`,
/// `10.0.0.1`, `2026-01-01T00:00:00Z`): every decimal integer is also a float to that
/// parser.
fn plain(text: &str) -> Result<Scalar<'_>, Unsure> {
    match text {
        "null" | "Null" | "NULL" | "~" => return Ok(Scalar::Null),
        "true" | "True" | "TRUE" => return Ok(Scalar::Bool(true)),
        "false" | "False" | "FALSE" => return Ok(Scalar::Bool(false)),
        _ => {}
    }
    let bytes = text.as_bytes();
    let decimal = |d: &[u8]| !d.is_empty() && d.iter().all(u8::is_ascii_digit) && (d.len() == 1 || d[0] != b'0');
    if decimal(bytes) {
        return text.parse::<u64>().map(Scalar::U64).map_err(|_| Unsure);
    }
    if let Some(rest) = bytes.strip_prefix(b"-") {
        if decimal(rest) && rest != b"0" {
            return text.parse::<i64>().map(Scalar::I64).map_err(|_| Unsure);
        }
    }
    let unsigned = bytes.strip_prefix(b"+").or_else(|| bytes.strip_prefix(b"-")).unwrap_or(bytes);
    match unsigned.first() {
        // `.5`, `.inf`, `.nan`, …
        Some(b'.') => return Err(Unsure),
        Some(b) if b.is_ascii_digit() => {
            let radix = [b"0x", b"0o", b"0b"].iter().any(|p| unsigned.starts_with(*p));
            if radix || text.strip_prefix('+').unwrap_or(text).parse::<f64>().is_ok() {
                return Err(Unsure);
            }
        }
        _ => {}
    }
    Ok(Scalar::Str(Cow::Borrowed(text)))
}

impl<'a> NodeDe<'a, '_> {
    /// The node of the value after `key:` (or `- `) with nothing after it on the line, at
    /// indentation `indent`: the lines under it, a sequence at the same indentation after a
    /// key, or nothing.
    fn under(cur: &Cursor<'a>, indent: usize, after_key: bool) -> Node<'a> {
        match cur.peek() {
            Some(l) if l.indent > indent => Node::Block(l.indent),
            Some(l) if after_key && l.indent == indent && item(l.text).is_some() => Node::Block(indent),
            _ => Node::Null,
        }
    }
}

impl<'de> Deserializer<'de> for NodeDe<'de, '_> {
    type Error = Unsure;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Unsure> {
        match self.node {
            Node::Null => visitor.visit_unit(),
            Node::Inline(text) => match inline(text)? {
                Ok(Scalar::Null) => visitor.visit_unit(),
                Ok(Scalar::Bool(v)) => visitor.visit_bool(v),
                Ok(Scalar::U64(v)) => visitor.visit_u64(v),
                Ok(Scalar::I64(v)) => visitor.visit_i64(v),
                Ok(Scalar::Str(Cow::Borrowed(v))) => visitor.visit_borrowed_str(v),
                Ok(Scalar::Str(Cow::Owned(v))) => visitor.visit_string(v),
                // An empty collection counts towards the nesting limit too.
                Err(_) if self.cur.depth >= MAX_DEPTH => Err(Unsure),
                Err(true) => visitor.visit_map(de::value::MapDeserializer::new(std::iter::empty::<((), ())>())),
                Err(false) => visitor.visit_seq(de::value::SeqDeserializer::new(std::iter::empty::<()>())),
            },
            Node::Block(indent) => {
                let line = self.cur.peek().ok_or(Unsure)?;
                if line.indent != indent || self.cur.depth >= MAX_DEPTH {
                    return Err(Unsure);
                }
                self.cur.depth += 1;
                let value = if item(line.text).is_some() {
                    visitor.visit_seq(BlockSeq { cur: &mut *self.cur, indent })
                } else if entry(line.text).is_some() {
                    visitor.visit_map(BlockMap { cur: &mut *self.cur, indent, value: None })
                } else {
                    Err(Unsure)
                };
                self.cur.depth -= 1;
                value
            }
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Unsure> {
        // A mapping key (the only thing read as a string): its text, as written.
        match self.node {
            Node::Inline(text) => visitor.visit_borrowed_str(text),
            _ => Err(Unsure),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Unsure> {
        self.deserialize_string(visitor)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char bytes byte_buf option unit unit_struct
        newtype_struct seq tuple tuple_struct map struct enum identifier ignored_any
    }
}

struct BlockSeq<'a, 'c> {
    cur: &'c mut Cursor<'a>,
    indent: usize,
}

impl<'de> SeqAccess<'de> for BlockSeq<'de, '_> {
    type Error = Unsure;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, Unsure> {
        let Some(line) = self.cur.peek() else { return Ok(None) };
        if line.indent < self.indent {
            return Ok(None);
        }
        if line.indent > self.indent {
            return Err(Unsure);
        }
        let Some(rest) = item(line.text) else { return Ok(None) };
        let node = if rest.is_empty() {
            self.cur.next += 1;
            NodeDe::under(self.cur, self.indent, false)
        } else if entry(rest).is_some() {
            // A mapping that starts on the item's line: its keys are where this one is.
            let indent = self.indent + line.text.len() - rest.len();
            self.cur.lines[self.cur.next] = Line { indent, text: rest };
            Node::Block(indent)
        } else if item(rest).is_some() {
            return Err(Unsure);
        } else {
            self.cur.next += 1;
            Node::Inline(rest)
        };
        seed.deserialize(NodeDe { cur: self.cur, node }).map(Some)
    }
}

struct BlockMap<'a, 'c> {
    cur: &'c mut Cursor<'a>,
    indent: usize,
    /// The text after the key just read.
    value: Option<&'a str>,
}

impl<'de> MapAccess<'de> for BlockMap<'de, '_> {
    type Error = Unsure;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Unsure> {
        let Some(line) = self.cur.peek() else { return Ok(None) };
        if line.indent < self.indent {
            return Ok(None);
        }
        if line.indent > self.indent {
            return Err(Unsure);
        }
        let (key, rest) = entry(line.text).ok_or(Unsure)?;
        self.cur.next += 1;
        self.value = Some(rest);
        seed.deserialize(NodeDe { cur: self.cur, node: Node::Inline(key) }).map(Some)
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, Unsure> {
        let rest = self.value.take().ok_or(Unsure)?;
        let node = if rest.is_empty() { NodeDe::under(self.cur, self.indent, true) } else { Node::Inline(rest) };
        seed.deserialize(NodeDe { cur: self.cur, node })
    }
}

#[cfg(test)]
mod tests {
    use std::marker::PhantomData;

    use serde_json::Value;

    use super::*;

    fn block(text: &str) -> Result<Value, Unsure> {
        Cursor::new(text)?.read(PhantomData::<Value>)
    }

    fn full(text: &str) -> Value {
        serde_yaml_ng::from_str(text).expect("valid YAML")
    }

    /// Texts the block reader reads, each exactly as the full parser does.
    #[test]
    fn reads_block_yaml_as_the_full_parser_does() {
        let texts = [
            "a: 1\nb: x\n",
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels:\n    app: web\n    tier: ''\n",
            "spec:\n  containers:\n  - name: c\n    args:\n    - a\n    - 'b c'\n    ports: []\n  - name: d\n    env: {}\n",
            "list:\n- - a\n",
            "k:\n  - 1\n  - -2\n  - 0\n  - 18446744073709551615\n",
            "q: 'it''s'\nd: \"plain\"\ne: ''\n",
            "n: null\nm: ~\no:\nt: true\nf: False\nnum: 64Gi\nts: 2026-01-01T00:00:00Z\nurl: http://x:80/y\n",
            "node-00001: a\nzone: node-00001\nv: -1x\nw: +x\n",
            "# comment\n\na:\n  # inside\n  b: 1\n\n",
            "-\n  a: 1\n- \n- x\n",
            "a:\n-\n- b\n",
            "",
            "# only a comment\n",
            "a: b c  \n",
        ];
        for text in texts {
            match block(text) {
                Ok(v) => assert_eq!(v, full(text), "{text:?}"),
                Err(Unsure) => assert!(text.starts_with("list:"), "{text:?} should be read"),
            }
        }
    }

    /// What the block reader leaves to the full parser: it never reads it differently.
    #[test]
    fn leaves_everything_else_to_the_full_parser() {
        let texts = [
            "a: |\n  x\n",
            "a: >\n  x\n",
            "a: b\n  c\n",
            "a: \"x\\ty\"\n",
            "a: {b: 1}\n",
            "a: [1]\n",
            "a: &x 1\nb: *x\n",
            "a: !!str 1\n",
            "a: 1 # c\n",
            "a:\tb\n",
            "a: 1e3\n",
            "a: 0x1f\n",
            "a: .5\n",
            "a: 007\n",
            "a: +1\n",
            "a: 'x\n",
            "\"a\": 1\n",
            "? a\n: 1\n",
            "a: b: c\n",
            "a: x:\n",
            "a: 1\r\n",
            "a: \u{e9}\n",
            "a: 99999999999999999999\n",
            "a:\n  b\n",
            "  a: 1\nb: 2\n",
            "a: 1\n  b: 2\n",
        ];
        for text in texts {
            assert!(block(text).is_err(), "{text:?} read as {:?}", block(text));
        }
    }
}
