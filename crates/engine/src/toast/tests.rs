use super::*;
use proptest::prelude::*;

#[test]
fn pointers_and_compressed_forms_round_trip() {
    let p = Pointer {
        kind: Kind::Bytea,
        compressed: true,
        raw_len: 1 << 29,
        stored_len: 12_345,
        value_id: u64::MAX - 3,
        first: Tid::new(7, 9),
    };
    let bytes = p.encode();
    assert!(matches!(Form::parse(&bytes), Some(Form::External(q)) if q == p));
    // Anything after a pointer makes it malformed.
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(Form::parse(&longer).is_none());
    let raw = "abc".repeat(100);
    let lz4 = lz4_flex::block::compress(raw.as_bytes());
    let form = compressed_form(Kind::Text, raw.len(), &lz4);
    match Form::parse(&form) {
        Some(Form::InLine {
            kind,
            raw_len,
            lz4: l,
        }) => {
            assert_eq!(
                (kind, raw_len as usize, l),
                (Kind::Text, raw.len(), &lz4[..])
            );
        }
        _ => panic!("not an in-line compressed form"),
    }
    // In line and not compressed is not a stored form.
    assert!(Form::parse(&[0, 1, 0, 0, 0]).is_none());
}

#[test]
fn the_kinds_check_what_they_read() {
    assert!(Kind::Text.value(vec![0xff, 0xfe]).is_err());
    assert!(Kind::Numeric.value(vec![0xff; 3]).is_err());
    assert_eq!(Kind::Bytea.value(vec![1, 2]), Ok(Value::Bytea(vec![1, 2])));
}

#[test]
fn chunks_fill_a_page() {
    let row = Chunk::row(
        u64::MAX,
        usize::MAX >> 1,
        Some(Tid::new(u32::MAX, u16::MAX)),
        &[0; CHUNK_BYTES],
    );
    assert!(HEADER_BYTES + crate::value::encoded_row_len(&row) <= MAX_TUPLE_BYTES);
}

proptest! {
    #[test]
    fn garbage_forms_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = Form::parse(&bytes);
    }
}
