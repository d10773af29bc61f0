//! No heap allocation per operation in steady state: TLP encode and decode, bridge frames,
//! the lossless transport, and the S4.4 event loop (its allocations do not grow with the
//! modeled time).

use iommulab_base::addr::Bdf;
use iommulab_pcie::bridge::frame::{Frame, FrameKind, Mac};
use iommulab_pcie::bridge::transport::{Receiver, Sender, TransportConfig};
use iommulab_pcie::timing::{Direction, ExpEtherParams, Scenario, simulate};
use iommulab_pcie::tlp::{Completion, MAX_TLP_BYTES, MemRequest, Tlp};

#[global_allocator]
static ALLOC: alloc_counter::CountingAlloc = alloc_counter::CountingAlloc::new();

#[test]
fn tlps_frames_and_the_transport_do_not_allocate() {
    let nic = Bdf::new(1, 0, 1).unwrap();
    let payload = [7u8; 256];
    let mut buf = [0u8; MAX_TLP_BYTES];
    let mut wire = vec![0u8; 2 * MAX_TLP_BYTES];
    let mut tx = Sender::new(TransportConfig::default());
    let mut rx = Receiver::default();
    let before = alloc_counter::this_thread();
    let mut delivered = 0u64;
    for i in 0..100_000u64 {
        let t = match i % 3 {
            0 => Tlp::MemRead(MemRequest::new(
                nic,
                i.to_le_bytes()[0],
                0x8000_0000 + (i % 1024) * 4096,
                128,
            )),
            1 => Tlp::MemWrite(
                MemRequest::new(nic, 0, 0x1_0000_0000 + (i % 64) * 4096, 64),
                &payload,
            ),
            _ => Tlp::CompletionData(Completion::new(nic, nic, 1, 64, 0), &payload[..64]),
        };
        let n = t.encode(&mut buf).unwrap();
        assert_eq!(Tlp::decode(&buf[..n]).unwrap(), t);
        tx.queue(&buf[..n]).unwrap();
        let (seq, tlp) = tx.poll(i).unwrap();
        let f = Frame {
            dst: Mac::local(2),
            src: Mac::local(1),
            vlan: 10,
            kind: FrameKind::Data,
            seq,
            ack: 0,
            tlp,
        };
        let len = f.encode(&mut wire).unwrap();
        let got = Frame::decode(&wire[..len]).unwrap();
        if rx.on_data(got.seq) {
            delivered += 1;
        }
        tx.on_ack(rx.ack(), i);
    }
    assert_eq!(alloc_counter::this_thread() - before, 0);
    assert_eq!(delivered, 100_000);
}

#[test]
fn the_event_loop_allocates_the_same_for_any_modeled_time() {
    let p = ExpEtherParams::default();
    let count = |d: f64| {
        let s = Scenario {
            direction: Direction::InterHost,
            streams: vec![1; 3],
            qos: false,
            duration_s: d,
        };
        let before = alloc_counter::this_thread();
        let r = simulate(&p, &s).unwrap();
        (alloc_counter::this_thread() - before, r.events)
    };
    let (short, e1) = count(0.0005);
    let (long, e2) = count(0.006);
    assert!(e2 > 10 * e1, "{e1} {e2}");
    assert_eq!(short, long, "allocations grew with the modeled time");
}
