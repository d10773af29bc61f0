//! Fuzzes the native-trace block decoder (`iommulab::trace::format`, columns) with arbitrary
//! block payloads behind a *valid* CRC, so the decoder's own checks — not the checksum — must
//! catch every inconsistency.
//!
//! Checks, for every input:
//! - no panic, through `next_event` and through `read_batch`;
//! - both paths agree: the same events, or both an error;
//! - a block that decodes yields exactly the event count its header declares, and every
//!   event is one a writer could have written (device in the table, `nents` only on
//!   `map_sg`/`unmap_sg`).
#![no_main]

use iommulab::trace::format::NativeWriter;
use iommulab::trace::{Event, EventKind, EventSource, NativeReader, TraceHeader};
use libfuzzer_sys::fuzz_target;

/// A one-device trace whose only block has `count` events and payload `payload`.
fn file(count: u32, payload: &[u8]) -> Vec<u8> {
    let header = TraceHeader {
        devices: vec!["dev".into()],
        source: "fuzz".into(),
    };
    let mut bytes = NativeWriter::new(Vec::new(), &header)
        .and_then(NativeWriter::finish)
        .expect("an empty trace");
    bytes.truncate(bytes.len() - 16); // drop the empty trailer
    let count_le = count.to_le_bytes();
    let len = u32::try_from(payload.len()).unwrap_or(u32::MAX).to_le_bytes();
    let mut h = crc32fast::Hasher::new();
    h.update(&count_le);
    h.update(&len);
    h.update(payload);
    bytes.extend_from_slice(&count_le);
    bytes.extend_from_slice(&len);
    bytes.extend_from_slice(&h.finalize().to_le_bytes());
    bytes.extend_from_slice(payload);
    let mark = u32::MAX.to_le_bytes();
    let total = u64::from(count).to_le_bytes();
    let mut h = crc32fast::Hasher::new();
    h.update(&mark);
    h.update(&total);
    bytes.extend_from_slice(&mark);
    bytes.extend_from_slice(&total);
    bytes.extend_from_slice(&h.finalize().to_le_bytes());
    bytes
}

fn one_by_one(bytes: &[u8]) -> Option<Vec<Event>> {
    let mut r = NativeReader::new(bytes, "fuzz.iot".into()).ok()?;
    let mut v = Vec::new();
    while let Some(e) = r.next_event().ok()? {
        v.push(e);
    }
    Some(v)
}

fn batched(bytes: &[u8]) -> Option<(Vec<Event>, usize)> {
    let mut r = NativeReader::new(bytes, "fuzz.iot".into()).ok()?;
    let (mut v, mut batch) = (Vec::new(), Vec::new());
    while r.read_batch(&mut batch).ok()? != 0 {
        v.extend_from_slice(&batch);
    }
    Some((v, r.header().devices.len()))
}

fuzz_target!(|data: &[u8]| {
    let Some((&c, payload)) = data.split_first() else {
        return;
    };
    let count = u32::from(c) * 3; // up to 765 events: several miniblocks
    let bytes = file(count, payload);
    let a = one_by_one(&bytes);
    let b = batched(&bytes);
    assert_eq!(a.is_some(), b.is_some());
    if let (Some(a), Some((b, devices))) = (a, b) {
        assert_eq!(a, b);
        assert_eq!(a.len(), count as usize);
        for e in &a {
            assert!(usize::from(e.device) < devices);
            assert!(e.nents == 0 || matches!(e.kind, EventKind::MapSg | EventKind::UnmapSg));
        }
    }
});
