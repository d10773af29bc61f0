//! TLP encode + decode throughput (at least 50 M TLPs/s on one core).
//!
//! Each iteration encodes one TLP into a stack buffer and decodes it back, over a batch of
//! 1024 headers cycling through the kinds S4.4's traffic is made of: 3 DW memory reads,
//! 64-byte completions with data, 4 DW memory writes with 128 bytes, configuration reads.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use iommulab_base::addr::Bdf;
use iommulab_pcie::tlp::{Completion, ConfigKind, ConfigRequest, MAX_TLP_BYTES, MemRequest, Tlp};

fn batch(payload: &[u8]) -> Vec<Tlp<'_>> {
    let nic = Bdf::new(1, 0, 1).unwrap();
    let host = Bdf::new(0, 0, 0).unwrap();
    (0..1024u32)
        .map(|i| {
            let tag = (i & 0xff) as u8;
            let page = u64::from(i) << 12;
            match i % 4 {
                0 => Tlp::MemRead(MemRequest::new(nic, tag, 0x8000_0000 | page, 128)),
                1 => Tlp::CompletionData(
                    Completion::new(host, nic, tag, 512, ((i * 64) & 0x7f) as u8 & 0x40),
                    &payload[..64],
                ),
                2 => Tlp::MemWrite(
                    MemRequest::new(nic, tag, 0x1_0000_0000 | page, 32),
                    &payload[..128],
                ),
                _ => Tlp::ConfigRead(ConfigRequest {
                    kind: ConfigKind::Type0,
                    requester: host,
                    tag,
                    target: nic,
                    register: (i % 1024) as u16,
                    first_be: 0xf,
                }),
            }
        })
        .collect()
}

fn encode_decode(c: &mut Criterion) {
    let payload = [0x5au8; 256];
    let tlps = batch(&payload);
    let mut g = c.benchmark_group("tlp");
    g.throughput(Throughput::Elements(tlps.len() as u64));
    g.bench_function("encode_decode_mixed", |b| {
        let mut buf = [0u8; MAX_TLP_BYTES];
        b.iter(|| {
            let mut sum = 0usize;
            for t in &tlps {
                let n = t.encode(&mut buf).unwrap();
                let back = Tlp::decode(black_box(&buf[..n])).unwrap();
                sum += back.encoded_len();
            }
            black_box(sum)
        });
    });
    g.bench_function("decode_mrd_3dw", |b| {
        let mut buf = [0u8; 16];
        let n = Tlp::MemRead(MemRequest::new(
            Bdf::new(1, 0, 1).unwrap(),
            3,
            0x8000_1000,
            128,
        ))
        .encode(&mut buf)
        .unwrap();
        b.iter(|| {
            let mut sum = 0u64;
            for _ in 0..1024 {
                if let Ok(Tlp::MemRead(m)) = Tlp::decode(black_box(&buf[..n])) {
                    sum += m.address;
                }
            }
            black_box(sum)
        });
    });
    g.finish();
}

criterion_group!(benches, encode_decode);
criterion_main!(benches);
