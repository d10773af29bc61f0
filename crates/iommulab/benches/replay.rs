//! Trace replay speed: events per second through a whole configuration.
//!
//! Cases (group `replay`): a 400 000-event trace of the `pseudo-scsi` workload (map, unmap;
//! recorded with Linux-like IOVAs), held in memory, replayed through `modern` (magazines +
//! flush queue) and `default` (rbtree + deferred) with the `modern` cost preset; the trace
//! source, the replay adapter (address matching), the DMA layer, the allocator, the flush
//! policy and the VT-d model are all in the measured loop.

use std::hint::black_box;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use iommulab::experiment::record::record;
use iommulab::experiment::{ExperimentConfig, NamedConfig, RunLabels, no_progress, run_workload};
use iommulab::hw::cost::CostPreset;
use iommulab::trace::{Event, EventSink, MemorySource, TraceError, TraceHeader};
use iommulab::workload::TraceWorkload;
use iommulab::workload::{PseudoScsi, PseudoScsiConfig};

const EVENTS: u64 = 400_000;

#[derive(Default)]
struct VecSink(Vec<Event>);

impl EventSink for VecSink {
    fn set_devices(&mut self, _: &[String]) -> Result<(), TraceError> {
        Ok(())
    }
    fn write(&mut self, e: &Event) -> Result<(), TraceError> {
        self.0.push(*e);
        Ok(())
    }
    fn finish(self: Box<Self>) -> Result<(), TraceError> {
        Ok(())
    }
}

fn trace() -> (TraceHeader, Vec<Event>) {
    let mut w = PseudoScsi::new(PseudoScsiConfig {
        ios: u64::MAX,
        outstanding: 8,
        ..PseudoScsiConfig::default()
    });
    let mut sink = VecSink::default();
    record(&mut w, &mut sink, EVENTS, 1000).unwrap();
    let header = TraceHeader {
        devices: vec!["sim0".into()],
        source: "bench".into(),
    };
    (header, sink.0)
}

fn labels() -> RunLabels {
    RunLabels {
        config: "bench".into(),
        cost_preset: "modern".into(),
        seed: 0,
        io_size: 0,
        outstanding: 0,
        cpus: 1,
        touch: false,
    }
}

fn replay(c: &mut Criterion) {
    let (header, events) = trace();
    let mut g = c.benchmark_group("replay");
    g.throughput(Throughput::Elements(events.len() as u64));
    g.sample_size(20);
    for named in [NamedConfig::Modern, NamedConfig::Default] {
        let mut cfg = ExperimentConfig {
            configuration: named,
            ..ExperimentConfig::default()
        };
        cfg.hardware.cost = CostPreset::Modern;
        g.bench_function(named.name(), |b| {
            b.iter_batched(
                || TraceWorkload::new(MemorySource::new(header.clone(), events.clone())),
                |mut w| {
                    black_box(
                        run_workload(&cfg, &mut w, labels(), false, None, &mut no_progress)
                            .unwrap(),
                    )
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, replay);
criterion_main!(benches);
