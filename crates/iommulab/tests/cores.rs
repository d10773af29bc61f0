//! The many-core model through `run_experiment`: `[machine] cpus` in a configuration, one
//! CPU untouched, a lone stream never waits, the shared lock stops the old designs scaling
//! (a ticket lock collapses past saturation, a queued one levels off) while per-CPU caches
//! and flush queues scale, and bad machines are refused by name.

use iommulab::experiment::{ExperimentConfig, no_progress, run_experiment};

fn run(toml: &str) -> iommulab::experiment::RunResult {
    let cfg = ExperimentConfig::from_toml(toml).unwrap();
    run_experiment(&cfg, &mut no_progress).unwrap()
}

/// The pseudo driver on `streams` CPUs of a `cpus`-CPU machine.
fn cfg(configuration: &str, cost: &str, cpus: u16, streams: u16, ios: u64) -> String {
    format!(
        "configuration = \"{configuration}\"\n\
         [hardware]\ncost = \"{cost}\"\n\
         [machine]\ncpus = {cpus}\n\
         [workload]\nios = {ios}\ncpus = {streams}\noutstanding = {streams}\n"
    )
}

/// Throughput in the steady state: 4,000 I/Os per CPU. In a short run the warm-up weighs:
/// every CPU's first magazines come from the tree under its lock at once (250 I/Os per CPU
/// give `linux-lazy` 8.9× on 16 CPUs, 4,000 give 15.1×).
fn throughput(configuration: &str, cost: &str, cpus: u16) -> f64 {
    let r = run(&cfg(
        configuration,
        cost,
        cpus,
        cpus,
        4000 * u64::from(cpus),
    ));
    r.cores.expect("a many-core run reports cores").throughput
}

#[test]
fn without_a_machine_there_is_no_many_core_part_and_nothing_changes() {
    let toml = "configuration = \"linux-lazy\"\n[workload]\nios = 500\n";
    let r = run(toml);
    assert!(r.cores.is_none());
    let json = serde_json::to_string(&r).unwrap();
    assert!(!json.contains("\"cores\""), "{json}");
    let cfg = ExperimentConfig::from_toml(toml).unwrap();
    assert!(!serde_json::to_string(&cfg).unwrap().contains("machine"));
}

#[test]
fn a_lone_stream_never_waits_and_keeps_the_one_cpu_clock() {
    // One CPU, then four CPUs with every operation on CPU 0: nothing is shared with anyone.
    let r = run(&cfg("2.6.26-deferred", "vtd-2008", 4, 1, 2000));
    let c = r.cores.unwrap();
    let alone = run(&cfg("2.6.26-deferred", "vtd-2008", 1, 1, 2000))
        .cores
        .unwrap();
    assert_eq!(alone.makespan_cycles, c.makespan_cycles);
    assert_eq!((c.ios_per_cpu_min, c.ios_per_cpu_max), (2000, 2000));
    assert_eq!(c.tree_lock.wait_cycles + c.flush_lock.wait_cycles, 0);
    assert_eq!(c.tree_lock.transfers, 0);
    assert_eq!(c.makespan_cycles, c.work_cycles);
    // The one-CPU clock of the same work, without the end-of-run drain, within 1%.
    let cycles = r.modeled_seconds * 3.0e9;
    let rel = (c.makespan_cycles as f64 - cycles).abs() / cycles;
    assert!(rel < 0.01, "{} vs {cycles}", c.makespan_cycles);
}

#[test]
fn the_shared_resources_stop_the_stock_design_and_per_cpu_caches_scale() {
    // One IOVA tree lock and an invalidation at every unmap: the queued-invalidation
    // hardware and the lock saturate, so 16 cores are far from 16× and 8 more cores add
    // little.
    let strict = |c| throughput("pre-4.7-strict", "modern", c);
    let (s1, s8, s16) = (strict(1), strict(8), strict(16));
    assert!(s16 < 8.0 * s1, "{s1} → {s16}");
    assert!(s16 < 1.25 * s8, "{s8} → {s16}");
    // Magazines + flush queue: close to linear.
    let lazy = |c| throughput("linux-lazy", "modern", c);
    let (l1, l16) = (lazy(1), lazy(16));
    assert!(l16 > 12.0 * l1, "{l1} → {l16}");
}

#[test]
fn a_saturated_ticket_lock_collapses_and_a_queued_one_levels_off() {
    // P5.8: a ticket lock's hand-off grows with the CPUs spinning on it, so past saturation
    // 16 cores do less than 8; a queued spinlock's hand-off does not grow, so they level off.
    let tp = |spinlock: &str, c: u16| {
        let toml = cfg("pre-4.7-strict", "modern", c, c, 4000 * u64::from(c)).replace(
            "[machine]\n",
            &format!("[machine]\nspinlock = \"{spinlock}\"\n"),
        );
        run(&toml).cores.expect("cores").throughput
    };
    let (t8, t16) = (tp("ticket", 8), tp("ticket", 16));
    assert!(t16 < 0.9 * t8, "ticket: {t8} → {t16}");
    let (q8, q16) = (tp("queued", 8), tp("queued", 16));
    assert!(q16 >= 0.95 * q8, "queued: {q8} → {q16}");
    // Without `spinlock`, a kernel without magazines has ticket locks.
    let default16 = throughput("pre-4.7-strict", "modern", 16);
    assert_eq!(default16, t16);
}

#[test]
fn the_saturated_resource_is_the_one_that_waits() {
    // vtd-2008: register-based invalidation, 2000 cycles a request under the register lock,
    // about 25,000 cycles of work per I/O: 16 cores ask 1.3 times what it can serve.
    let r = run(&cfg("pre-4.7-strict", "vtd-2008", 16, 16, 1000));
    let c = r.cores.unwrap();
    assert!(
        c.invalidation.lock.contended > c.invalidation.batches / 2,
        "{c:?}"
    );
    assert!(c.invalidation.max_depth >= 4, "{c:?}");
    let busy = c.invalidation.lock.hold_cycles as f64 / c.makespan_cycles as f64;
    assert!(busy > 0.9, "register lock busy {busy}");
    assert!(c.wait_cycles_per_io > 0.0);
    assert_eq!(c.depot_lock.acquisitions, 0, "no magazines in pre-4.7");
}

#[test]
fn bad_machines_are_refused_by_key() {
    for (toml, want) in [
        ("[machine]\ncpus = 0\n", "machine.cpus"),
        ("[machine]\ncpus = 5000\n", "machine.cpus"),
        (
            "[machine]\ncpus = 2\n[system]\nkind = \"guest\"\n",
            "machine",
        ),
        ("[machine]\ncores = 2\n", "cores"),
        (
            "[machine]\ncpus = 2\nspinlock = \"queued\"\nticket_handoff_per_waiter = 10\n",
            "machine.ticket_handoff_per_waiter",
        ),
        ("[machine]\ncpus = 2\nspinlock = \"mcs\"\n", "spinlock"),
    ] {
        let e = ExperimentConfig::from_toml(toml)
            .and_then(|c| c.resolve().map(|_| ()))
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{toml}: {e}");
    }
}

#[test]
fn the_flush_timer_fires_by_the_machines_clock() {
    // 2.6.26's deferred flush with an array no run fills, so only its 1 ms timer flushes;
    // every I/O's own path is 3 M cycles (1 ms at 3 GHz). On 16 CPUs the machine runs 1/16
    // as long as the one-CPU clock, which sums every CPU's work: a timer driven by that
    // clock fires about 16 times per ms of the machine instead of about once.
    let timer_flushes_per_ms = |cpus: u16| {
        let r = run(&format!(
            "[mechanisms]\nallocator = \"rbtree\"\n\
             flush = {{ kind = \"deferred\", entries = 100000, timeout_ms = 1 }}\n\
             [hardware]\ncost = \"modern\"\n\
             [hardware.cost_overrides]\nio_path = 3000000\n\
             [machine]\ncpus = {cpus}\n\
             [workload]\nios = 640\ncpus = {cpus}\noutstanding = {cpus}\n"
        ));
        let c = r.cores.expect("a many-core run reports cores");
        assert_eq!(r.stats.flush.flushes_full, 0);
        r.stats.flush.flushes_timeout as f64 / (c.modeled_seconds * 1e3)
    };
    for cpus in [1, 16] {
        // A timer arms at the first unmap after a flush and fires at the first tick past its
        // deadline: a little under one flush per ms.
        let f = timer_flushes_per_ms(cpus);
        assert!(
            (0.7..=1.0).contains(&f),
            "{cpus} CPUs: {f} timer flushes per ms"
        );
    }
}
