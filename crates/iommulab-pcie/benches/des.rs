//! The S4.4 discrete-event model's speed (60 s of 10 GbE for 3 hosts in under
//! 10 s). One iteration simulates 60 modeled seconds; criterion's minimum of 10 samples.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use iommulab_pcie::timing::{Direction, ExpEtherParams, Scenario, simulate};

fn sixty_seconds(c: &mut Criterion) {
    let p = ExpEtherParams::default();
    let mut g = c.benchmark_group("des_60s_3_hosts");
    g.sample_size(10).measurement_time(Duration::from_secs(60));
    for (name, direction) in [
        ("receive", Direction::Receive),
        ("send", Direction::Send),
        ("inter_host", Direction::InterHost),
    ] {
        let s = Scenario {
            direction,
            streams: vec![1; 3],
            qos: false,
            duration_s: 60.0,
        };
        g.bench_function(name, |b| {
            b.iter(|| black_box(simulate(&p, &s).unwrap().total_gbps))
        });
    }
    g.finish();
}

criterion_group!(benches, sixty_seconds);
criterion_main!(benches);
