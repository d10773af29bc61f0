//! The file header (magic, version, flags, device table, source text, CRC32), the string
//! codec it shares with block preambles, and the rules for device tables and events that
//! every trace writer (native and CSV) enforces.

use std::io::Read;
use std::path::Path;

use super::columns::{get_varint, put_varint};
use super::{Bad, MAGIC, MAX_DEVICES, MAX_HEADER_BYTES, VERSION, crc_of, fill};
use crate::{Event, EventKind, TraceError, TraceHeader};

/// Checks a device table and source against the rules every writer enforces: at most
/// [`MAX_DEVICES`] names, each non-empty, unique, and free of `,`, `"` and control characters
/// (so CSV can carry it unquoted).
pub(crate) fn header_problem(devices: &[String]) -> Option<String> {
    if devices.len() > MAX_DEVICES {
        return Some(format!(
            "{} devices; a trace holds at most {MAX_DEVICES}",
            devices.len()
        ));
    }
    let mut seen = std::collections::HashSet::with_capacity(devices.len());
    for name in devices {
        if let Some(p) = device_name_problem(name) {
            return Some(p);
        }
        if !seen.insert(name.as_str()) {
            return Some(format!("device name {name:?} appears twice"));
        }
    }
    None
}

/// Why `name` cannot be a device name, if it cannot.
pub(crate) fn device_name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        Some("empty device name".to_owned())
    } else if name.chars().any(|c| c == ',' || c == '"' || c.is_control()) {
        Some(format!(
            "device name {name:?} contains a comma, quote or control character"
        ))
    } else {
        None
    }
}

/// Checks `extended` starts with `known`, and the table stays valid. Returns the new names.
pub(crate) fn extend_devices<'a>(
    known: &[String],
    extended: &'a [String],
) -> Result<&'a [String], String> {
    if extended.len() < known.len() || extended[..known.len()] != *known {
        return Err("the device table may only grow at its end".to_owned());
    }
    if let Some(p) = header_problem(extended) {
        return Err(p);
    }
    Ok(&extended[known.len()..])
}

/// Whether an event of `kind` carries `nents`.
#[inline]
pub(crate) const fn has_nents(kind: EventKind) -> bool {
    matches!(kind, EventKind::MapSg | EventKind::UnmapSg)
}

/// Why `e` cannot be written with a table of `devices` devices, if it cannot.
pub(crate) fn event_problem(e: &Event, devices: usize) -> Option<String> {
    if usize::from(e.device) >= devices {
        Some(format!(
            "event refers to device {}, but the table has {devices} devices",
            e.device
        ))
    } else if e.nents != 0 && !has_nents(e.kind) {
        Some(format!(
            "a {} event with nents = {} (only map_sg/unmap_sg carry nents)",
            e.kind.name(),
            e.nents
        ))
    } else {
        None
    }
}

/// The file header for `header`: magic, version, flags, payload length, the payload (device
/// table and source text) and its CRC32; or why the table cannot be written.
pub(super) fn encode(header: &TraceHeader) -> Result<Vec<u8>, String> {
    if let Some(what) = header_problem(&header.devices) {
        return Err(what);
    }
    let mut payload = Vec::new();
    put_varint(&mut payload, header.devices.len() as u64);
    for d in &header.devices {
        put_str(&mut payload, d);
    }
    put_str(&mut payload, &header.source);
    let Ok(len) = u32::try_from(payload.len()) else {
        return Err("header larger than 4 GiB".to_owned());
    };
    let mut pending = Vec::with_capacity(payload.len() + 20);
    pending.extend_from_slice(&MAGIC);
    pending.extend_from_slice(&VERSION.to_le_bytes());
    pending.extend_from_slice(&0u16.to_le_bytes());
    pending.extend_from_slice(&len.to_le_bytes());
    pending.extend_from_slice(&payload);
    let crc = crc_of(&[&pending[8..]]);
    pending.extend_from_slice(&crc.to_le_bytes());
    Ok(pending)
}

/// Reads and checks the file header from `r`: the table and how many bytes it took. `path`
/// names the file in errors only.
pub(super) fn read<R: Read>(r: &mut R, path: &Path) -> Result<(TraceHeader, u64), TraceError> {
    let mut reader_offset = 0u64;
    let mut fixed = [0u8; 16];
    let got = fill(r, &mut fixed).map_err(|source| TraceError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    if got >= 8 && fixed[..8] != MAGIC || got < 8 && fixed[..got] != MAGIC[..got] {
        return Err(TraceError::Corrupt {
            path: path.to_path_buf(),
            offset: 0,
            what: "not a native iommulab trace (bad magic bytes)".to_owned(),
        });
    }
    if got < 16 {
        return Err(TraceError::Truncated {
            path: path.to_path_buf(),
            offset: got as u64,
            what: "the file header".to_owned(),
        });
    }
    reader_offset += 16;
    let version = u16::from_le_bytes([fixed[8], fixed[9]]);
    let flags = u16::from_le_bytes([fixed[10], fixed[11]]);
    let len = u32::from_le_bytes([fixed[12], fixed[13], fixed[14], fixed[15]]);
    if len > MAX_HEADER_BYTES {
        return Err(TraceError::Corrupt {
            path: path.to_path_buf(),
            offset: 12,
            what: format!("header length {len} exceeds {MAX_HEADER_BYTES}"),
        });
    }
    let mut payload = vec![0u8; len as usize + 4];
    let got = fill(r, &mut payload).map_err(|source| TraceError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    if got < payload.len() {
        return Err(TraceError::Truncated {
            path: path.to_path_buf(),
            offset: reader_offset + got as u64,
            what: "the file header".to_owned(),
        });
    }
    let (body, crc) = payload.split_at(len as usize);
    let want = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
    if crc_of(&[&fixed[8..], body]) != want {
        return Err(TraceError::Corrupt {
            path: path.to_path_buf(),
            offset: 8,
            what: "header checksum mismatch".to_owned(),
        });
    }
    if version != VERSION {
        let hint = if version < VERSION {
            " (convert it with the iommulab release that wrote it, e.g. to CSV)"
        } else {
            ""
        };
        return Err(TraceError::Unsupported {
            path: path.to_path_buf(),
            what: format!(
                "native trace version {version}; this build reads version {VERSION}{hint}"
            ),
        });
    }
    if flags != 0 {
        return Err(TraceError::Unsupported {
            path: path.to_path_buf(),
            what: format!("native trace flags {flags:#x}; this build knows none"),
        });
    }
    let header = parse(body).map_err(|Bad(what)| TraceError::Corrupt {
        path: path.to_path_buf(),
        offset: 16,
        what: format!("header: {what}"),
    })?;
    reader_offset += payload.len() as u64;
    Ok((header, reader_offset))
}

/// Decodes the header payload: the device table, then the source text.
fn parse(body: &[u8]) -> Result<TraceHeader, Bad> {
    let mut pos = 0;
    let n = get_varint(body, &mut pos).ok_or(Bad("malformed device count"))?;
    if n > MAX_DEVICES as u64 {
        return Err(Bad("more than 65536 devices"));
    }
    let mut devices = Vec::new();
    for _ in 0..n {
        devices.push(get_str(body, &mut pos)?);
    }
    let source = get_str(body, &mut pos)?;
    if pos != body.len() {
        return Err(Bad("bytes after the source text"));
    }
    Ok(TraceHeader { devices, source })
}

/// Appends `s`: its length as a varint, then its bytes.
pub(super) fn put_str(buf: &mut Vec<u8>, s: &str) {
    put_varint(buf, s.len() as u64);
    buf.extend_from_slice(s.as_bytes());
}

/// Reads a string [`put_str`] wrote, at `pos` (advanced past it).
pub(super) fn get_str(buf: &[u8], pos: &mut usize) -> Result<String, Bad> {
    let len = get_varint(buf, pos).ok_or(Bad("a malformed string length"))?;
    let end = usize::try_from(len)
        .ok()
        .and_then(|l| pos.checked_add(l))
        .filter(|&e| e <= buf.len())
        .ok_or(Bad("a string longer than its record"))?;
    let s = std::str::from_utf8(&buf[*pos..end]).map_err(|_| Bad("a name that is not UTF-8"))?;
    *pos = end;
    Ok(s.to_owned())
}

#[cfg(test)]
mod tests {
    use super::super::tests::{decode_all, encode};
    use super::super::{NativeWriter, crc_of};
    use crate::{Event, EventKind, TraceError, TraceHeader};

    #[test]
    fn version_1_files_are_refused_by_name() {
        let mut bytes = encode(&TraceHeader::default(), &[]);
        bytes[8] = 1;
        let len = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
        let crc = crc_of(&[&bytes[8..16 + len]]);
        bytes[16 + len..20 + len].copy_from_slice(&crc.to_le_bytes());
        let err = decode_all(&bytes).unwrap_err().to_string();
        assert!(
            err.contains("native trace version 1; this build reads version 2"),
            "{err}"
        );
    }

    #[test]
    fn rejects_unknown_device_and_stray_nents() {
        let h = TraceHeader {
            devices: vec!["a".into()],
            source: String::new(),
        };
        let mut w = NativeWriter::new(Vec::new(), &h).unwrap();
        let mut e = Event::new(EventKind::Map);
        e.device = 1;
        assert!(matches!(w.write(&e), Err(TraceError::Invalid { .. })));
        e.device = 0;
        e.nents = 2;
        assert!(matches!(w.write(&e), Err(TraceError::Invalid { .. })));
        let bad = TraceHeader {
            devices: vec!["a,b".into()],
            source: String::new(),
        };
        assert!(matches!(
            NativeWriter::new(Vec::new(), &bad),
            Err(TraceError::Invalid { .. })
        ));
    }
}
