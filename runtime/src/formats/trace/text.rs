//! JSON text for trace events: the bytes `serde_json` writes, from a serializer that copies a string needing no escape whole instead of looking at it byte by byte.
//!
//! A trace is mostly strings (hashes, names, messages). `serde_json` checks every byte
//! of every string and key against its escape table; here a string is first checked as a
//! whole (a loop the compiler turns into vector instructions), and only a string holding a
//! quote, a backslash or a control character goes to `serde_json`'s own escaping. Numbers
//! are written by `serde_json` too, so the text is the same to the byte; a test compares
//! the two on every kind of event.

use serde::Serialize;
use serde::ser::{self, Impossible};

type Error = serde_json::Error;

/// Appends `value` as `serde_json::to_writer` would write it.
pub fn write<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> Result<(), Error> {
    value.serialize(&mut Writer { out })
}

/// Appends `text` as a JSON string, quotes and escapes included (the canonical form's
/// string writer, which copies a string needing no escape whole).
#[inline]
pub fn write_str(out: &mut Vec<u8>, text: &str) {
    crate::formats::canonical::write_string(text, out);
}

/// A number (or anything else `serde_json` writes without strings) as `serde_json` writes it.
fn write_plain<T: Serialize>(out: &mut Vec<u8>, value: T) -> Result<(), Error> {
    serde_json::to_writer(&mut *out, &value)
}

struct Writer<'a> {
    out: &'a mut Vec<u8>,
}

/// A list or record being written: whether an element has been written yet.
struct Compound<'w, 'a> {
    writer: &'w mut Writer<'a>,
    first: bool,
    /// For a variant written as `{"name":[...]}` or `{"name":{...}}`: the closing brace.
    wrapped: bool,
}

impl Compound<'_, '_> {
    fn separate(&mut self) {
        if !std::mem::take(&mut self.first) {
            self.writer.out.push(b',');
        }
    }

    fn field<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), Error> {
        self.separate();
        write_str(self.writer.out, key);
        self.writer.out.push(b':');
        value.serialize(&mut *self.writer)
    }

    fn close(self, bracket: u8) {
        self.writer.out.push(bracket);
        if self.wrapped {
            self.writer.out.push(b'}');
        }
    }
}

impl<'w, 'a> Writer<'a> {
    fn open(&'w mut self, bracket: u8, variant: Option<&str>) -> Compound<'w, 'a> {
        if let Some(variant) = variant {
            self.out.push(b'{');
            write_str(self.out, variant);
            self.out.push(b':');
        }
        self.out.push(bracket);
        Compound {
            writer: self,
            first: true,
            wrapped: variant.is_some(),
        }
    }
}

impl<'w, 'a> ser::Serializer for &'w mut Writer<'a> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Compound<'w, 'a>;
    type SerializeTuple = Compound<'w, 'a>;
    type SerializeTupleStruct = Compound<'w, 'a>;
    type SerializeTupleVariant = Compound<'w, 'a>;
    type SerializeMap = Compound<'w, 'a>;
    type SerializeStruct = Compound<'w, 'a>;
    type SerializeStructVariant = Compound<'w, 'a>;

    fn serialize_bool(self, value: bool) -> Result<(), Error> {
        self.out
            .extend_from_slice(if value { b"true" } else { b"false" });
        Ok(())
    }

    fn serialize_i8(self, value: i8) -> Result<(), Error> {
        write_plain(self.out, value)
    }

    fn serialize_i16(self, value: i16) -> Result<(), Error> {
        write_plain(self.out, value)
    }

    fn serialize_i32(self, value: i32) -> Result<(), Error> {
        write_plain(self.out, value)
    }

    fn serialize_i64(self, value: i64) -> Result<(), Error> {
        write_plain(self.out, value)
    }

    fn serialize_i128(self, value: i128) -> Result<(), Error> {
        write_plain(self.out, value)
    }

    fn serialize_u8(self, value: u8) -> Result<(), Error> {
        write_plain(self.out, value)
    }

    fn serialize_u16(self, value: u16) -> Result<(), Error> {
        write_plain(self.out, value)
    }

    fn serialize_u32(self, value: u32) -> Result<(), Error> {
        write_plain(self.out, value)
    }

    fn serialize_u64(self, value: u64) -> Result<(), Error> {
        write_plain(self.out, value)
    }

    fn serialize_u128(self, value: u128) -> Result<(), Error> {
        write_plain(self.out, value)
    }

    fn serialize_f32(self, value: f32) -> Result<(), Error> {
        write_plain(self.out, value)
    }

    fn serialize_f64(self, value: f64) -> Result<(), Error> {
        write_plain(self.out, value)
    }

    fn serialize_char(self, value: char) -> Result<(), Error> {
        write_str(self.out, value.encode_utf8(&mut [0; 4]));
        Ok(())
    }

    fn serialize_str(self, value: &str) -> Result<(), Error> {
        write_str(self.out, value);
        Ok(())
    }

    fn serialize_bytes(self, value: &[u8]) -> Result<(), Error> {
        write_plain(self.out, value)
    }

    fn serialize_none(self) -> Result<(), Error> {
        self.serialize_unit()
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<(), Error> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        self.serialize_unit()
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.serialize_str(variant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        let mut record = self.open(b'{', None);
        record.field(variant, value)?;
        record.close(b'}');
        Ok(())
    }

    fn serialize_seq(self, _len: Option<usize>) -> Result<Compound<'w, 'a>, Error> {
        Ok(self.open(b'[', None))
    }

    fn serialize_tuple(self, _len: usize) -> Result<Compound<'w, 'a>, Error> {
        Ok(self.open(b'[', None))
    }

    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Compound<'w, 'a>, Error> {
        Ok(self.open(b'[', None))
    }

    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'w, 'a>, Error> {
        Ok(self.open(b'[', Some(variant)))
    }

    fn serialize_map(self, _len: Option<usize>) -> Result<Compound<'w, 'a>, Error> {
        Ok(self.open(b'{', None))
    }

    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Compound<'w, 'a>, Error> {
        Ok(self.open(b'{', None))
    }

    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'w, 'a>, Error> {
        Ok(self.open(b'{', Some(variant)))
    }
}

impl ser::SerializeSeq for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.separate();
        value.serialize(&mut *self.writer)
    }

    fn end(self) -> Result<(), Error> {
        self.close(b']');
        Ok(())
    }
}

/// The other list shapes (tuples, tuple structs and variants) are written as lists.
macro_rules! written_as_a_list {
    ($($shape:ident :: $method:ident),*) => {$(
        impl ser::$shape for Compound<'_, '_> {
            type Ok = ();
            type Error = Error;

            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
                ser::SerializeSeq::serialize_element(self, value)
            }

            fn end(self) -> Result<(), Error> {
                ser::SerializeSeq::end(self)
            }
        }
    )*};
}

written_as_a_list!(
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

impl ser::SerializeMap for Compound<'_, '_> {
    type Ok = ();
    type Error = Error;

    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        self.separate();
        key.serialize(KeyWriter {
            out: self.writer.out,
        })?;
        self.writer.out.push(b':');
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        value.serialize(&mut *self.writer)
    }

    fn end(self) -> Result<(), Error> {
        self.close(b'}');
        Ok(())
    }
}

/// Records and record variants are written field by field.
macro_rules! written_as_a_record {
    ($($shape:ident),*) => {$(
        impl ser::$shape for Compound<'_, '_> {
            type Ok = ();
            type Error = Error;

            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result<(), Error> {
                self.field(key, value)
            }

            fn end(self) -> Result<(), Error> {
                self.close(b'}');
                Ok(())
            }
        }
    )*};
}

written_as_a_record!(SerializeStruct, SerializeStructVariant);

/// A map key: a string as it is, a number or a flag quoted, as `serde_json` writes them.
struct KeyWriter<'a> {
    out: &'a mut Vec<u8>,
}

impl KeyWriter<'_> {
    fn quoted<T: Serialize>(self, value: T) -> Result<(), Error> {
        self.out.push(b'"');
        write_plain(self.out, value)?;
        self.out.push(b'"');
        Ok(())
    }
}

fn key_must_be_a_string() -> Error {
    ser::Error::custom("key must be a string")
}

impl ser::Serializer for KeyWriter<'_> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Impossible<(), Error>;
    type SerializeTuple = Impossible<(), Error>;
    type SerializeTupleStruct = Impossible<(), Error>;
    type SerializeTupleVariant = Impossible<(), Error>;
    type SerializeMap = Impossible<(), Error>;
    type SerializeStruct = Impossible<(), Error>;
    type SerializeStructVariant = Impossible<(), Error>;

    fn serialize_str(self, value: &str) -> Result<(), Error> {
        write_str(self.out, value);
        Ok(())
    }

    fn serialize_char(self, value: char) -> Result<(), Error> {
        self.serialize_str(value.encode_utf8(&mut [0; 4]))
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), Error> {
        self.serialize_str(variant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        value.serialize(self)
    }

    fn serialize_bool(self, value: bool) -> Result<(), Error> {
        self.quoted(value)
    }

    fn serialize_i8(self, value: i8) -> Result<(), Error> {
        self.quoted(value)
    }

    fn serialize_i16(self, value: i16) -> Result<(), Error> {
        self.quoted(value)
    }

    fn serialize_i32(self, value: i32) -> Result<(), Error> {
        self.quoted(value)
    }

    fn serialize_i64(self, value: i64) -> Result<(), Error> {
        self.quoted(value)
    }

    fn serialize_i128(self, value: i128) -> Result<(), Error> {
        self.quoted(value)
    }

    fn serialize_u8(self, value: u8) -> Result<(), Error> {
        self.quoted(value)
    }

    fn serialize_u16(self, value: u16) -> Result<(), Error> {
        self.quoted(value)
    }

    fn serialize_u32(self, value: u32) -> Result<(), Error> {
        self.quoted(value)
    }

    fn serialize_u64(self, value: u64) -> Result<(), Error> {
        self.quoted(value)
    }

    fn serialize_u128(self, value: u128) -> Result<(), Error> {
        self.quoted(value)
    }

    fn serialize_f32(self, value: f32) -> Result<(), Error> {
        if value.is_finite() {
            self.quoted(value)
        } else {
            Err(ser::Error::custom("float key must be finite"))
        }
    }

    fn serialize_f64(self, value: f64) -> Result<(), Error> {
        if value.is_finite() {
            self.quoted(value)
        } else {
            Err(ser::Error::custom("float key must be finite"))
        }
    }

    fn serialize_bytes(self, _value: &[u8]) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_none(self) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_unit(self) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct, Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStruct, Error> {
        Err(key_must_be_a_string())
    }

    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Err(key_must_be_a_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::BTreeMap;

    fn same<T: Serialize + ?Sized>(value: &T) {
        let mut ours = Vec::new();
        let written = write(&mut ours, value).map(|()| ours);
        let theirs = serde_json::to_vec(value);
        match (written, theirs) {
            (Ok(ours), Ok(theirs)) => assert_eq!(
                String::from_utf8_lossy(&ours),
                String::from_utf8_lossy(&theirs)
            ),
            (Err(_), Err(_)) => {}
            (ours, theirs) => panic!("ours {ours:?}, serde_json {theirs:?}"),
        }
    }

    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        for text in [
            "",
            "plain",
            "say \"hi\"",
            "back\\slash",
            "line\nbreak\ttab\r\u{8}\u{c}",
            "\u{0}\u{1f}\u{7f}",
            "é ü 漢字 🙂",
            "</script>",
            &"x".repeat(100),
            &format!("{}\"", "y".repeat(70)),
        ] {
            same(text);
            same(&BTreeMap::from([(text, text)]));
        }
        same(&'"');
        same(&'a');
    }

    #[test]
    fn numbers_lists_and_records_are_written_as_serde_json_writes_them() {
        same(&json!({
            "int": -9_223_372_036_854_775_808i64,
            "uint": u64::MAX,
            "float": 0.1,
            "exp": 1e300,
            "small": 5e-324,
            "whole": 2.0,
            "list": [1, "two", null, true, false, [], {}],
            "nested": {"b": {"a": [{"z": 1}]}},
        }));
        same(&f64::NAN);
        same(&f64::INFINITY);
        same(&-0.0f64);
        same(&1.5f32);
        same(&i128::MIN);
        same(&u128::MAX);
        same(&Some(3u8));
        same(&None::<u8>);
        same(&());
        same(&(1, "a", 2.5));
        same(&[0u8, 255][..]);
        same(&BTreeMap::from([(1u32, "one"), (2, "two")]));
        same(&BTreeMap::from([(-1i64, true)]));
        same(&BTreeMap::from([(true, 1)]));
        same(&BTreeMap::from([(vec![1], 1)]));
    }

    #[derive(Serialize)]
    #[allow(dead_code)]
    enum Shape {
        Unit,
        New(u8),
        Tuple(u8, String),
        Record { side: f64, name: String },
    }

    #[derive(Serialize)]
    struct Unit;

    #[derive(Serialize)]
    struct New(String);

    #[derive(Serialize)]
    struct Pair(u8, u8);

    #[test]
    fn every_serde_shape_is_written_as_serde_json_writes_it() {
        same(&Shape::Unit);
        same(&Shape::New(7));
        same(&Shape::Tuple(1, "x".to_string()));
        same(&Shape::Record {
            side: 1.25,
            name: "sq\"uare".to_string(),
        });
        same(&Unit);
        same(&New("n".to_string()));
        same(&Pair(1, 2));
        same(&vec![Shape::Unit, Shape::New(1)]);
    }
}
