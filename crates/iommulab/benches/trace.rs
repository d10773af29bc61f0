//! Trace storage throughput. Cases:
//!
//! - `trace/read_native`: decode 1 M events of the synthetic trace from an in-memory `.iot`,
//!   one `next_event` call per event.
//! - `trace/read_native_batch`: the same through `read_batch` (a block per call, as replay,
//!   statistics and conversion read).
//! - `trace/baseline_vec`: iterate the same events from a `Vec` (the machine's ceiling).
//! - `trace/read_native_dyn`: the same through `dyn EventSource` (as replay reads).
//! - `trace/write_native`: encode the same events into a `Vec`.
//! - `trace/read_csv`: parse the same events from in-memory CSV.
//! - `trace/write_csv`: format them as CSV.
//!
//! Throughput is in events (`Throughput::Elements`).

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use iommulab::trace::EventSource;
use iommulab::trace::csv::{CsvReader, CsvWriter};
use iommulab::trace::format::{NativeReader, NativeWriter, synthetic};

const EVENTS: usize = 1_000_000;
const SEED: u64 = 42;

fn drain<S: EventSource + ?Sized>(src: &mut S) -> u64 {
    let mut n = 0u64;
    let mut sum = 0u64;
    while let Some(e) = src.next_event().expect("valid trace") {
        n += 1;
        sum = sum.wrapping_add(e.time_ns ^ e.len);
    }
    black_box(sum);
    n
}

fn native(c: &mut Criterion) {
    let (header, events) = synthetic(EVENTS, SEED);
    let mut w = NativeWriter::new(Vec::new(), &header).expect("header");
    for e in &events {
        w.write(e).expect("event");
    }
    let bytes = w.finish().expect("finish");

    let mut g = c.benchmark_group("trace");
    g.throughput(Throughput::Elements(events.len() as u64));
    g.sample_size(20);
    g.bench_function("read_native", |b| {
        b.iter(|| {
            let mut r =
                NativeReader::new(black_box(&bytes[..]), "bench.iot".into()).expect("header");
            drain(&mut r)
        })
    });
    g.bench_function("read_native_batch", |b| {
        let mut batch = Vec::new();
        b.iter(|| {
            let mut r =
                NativeReader::new(black_box(&bytes[..]), "bench.iot".into()).expect("header");
            let (mut n, mut sum) = (0u64, 0u64);
            while r.read_batch(&mut batch).expect("valid trace") != 0 {
                n += batch.len() as u64;
                for e in &batch {
                    sum = sum.wrapping_add(e.time_ns ^ e.len);
                }
            }
            black_box(sum);
            n
        })
    });
    g.bench_function("baseline_vec", |b| {
        b.iter(|| {
            let mut it = black_box(&events).iter().map(|e| Ok::<_, ()>(Some(*e)));
            let mut sum = 0u64;
            while let Some(Ok(Some(e))) = it.next() {
                sum = sum.wrapping_add(black_box(e).time_ns ^ e.len);
            }
            sum
        })
    });
    g.bench_function("read_native_dyn", |b| {
        b.iter(|| {
            let mut r: Box<dyn EventSource + '_> = Box::new(
                NativeReader::new(black_box(&bytes[..]), "bench.iot".into()).expect("header"),
            );
            drain(&mut *r)
        })
    });
    g.bench_function("write_native", |b| {
        b.iter(|| {
            let mut w =
                NativeWriter::new(Vec::with_capacity(bytes.len()), &header).expect("header");
            for e in black_box(&events) {
                w.write(e).expect("event");
            }
            w.finish().expect("finish").len()
        })
    });
    g.finish();
}

fn csv(c: &mut Criterion) {
    let (header, events) = synthetic(EVENTS, SEED);
    let mut w = CsvWriter::new(Vec::new(), &header).expect("header");
    for e in &events {
        w.write(e).expect("event");
    }
    let text = w.finish().expect("finish");

    let mut g = c.benchmark_group("trace");
    g.throughput(Throughput::Elements(events.len() as u64));
    g.sample_size(10);
    g.bench_function("read_csv", |b| {
        b.iter(|| {
            let mut r = CsvReader::new(black_box(&text[..]), "bench.csv".into()).expect("header");
            drain(&mut r)
        })
    });
    g.bench_function("write_csv", |b| {
        b.iter(|| {
            let mut w = CsvWriter::new(Vec::with_capacity(text.len()), &header).expect("header");
            for e in black_box(&events) {
                w.write(e).expect("event");
            }
            w.finish().expect("finish").len()
        })
    });
    g.finish();
}

criterion_group!(benches, native, csv);
criterion_main!(benches);
