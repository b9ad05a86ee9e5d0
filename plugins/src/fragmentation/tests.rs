use smallvec::smallvec;

use super::*;

fn typical(cpu: f64, count: u32, milli: u32, p: f64) -> Typical {
    Typical { req: Request { cpu, count, milli }, p, rep: TaskId(0) }
}

#[test]
fn fragmentation_counts_what_each_request_cannot_use() {
    // Half the workload wants 0.5 card, half wants 2 whole cards.
    let workload = [typical(1000.0, 1, 500, 0.5), typical(1000.0, 2, 1000, 0.5)];
    // Cards with 300 and 1000 free: the 0.5 request can use the idle card, so 300 is
    // fragmented for it; the 2-card request fits nowhere, so all 1300 are.
    let free = NodeFree { cpu: 8000.0, gpus: smallvec![300, 1000] };
    assert_eq!(frag_of(&workload, |_| true, &free), 0.5 * 300.0 + 0.5 * 1300.0);
    // Not enough cpu for either: everything is fragmented.
    let starved = NodeFree { cpu: 500.0, gpus: smallvec![300, 1000] };
    assert_eq!(frag_of(&workload, |_| true, &starved), 1300.0);
    // A request the node's labels rule out sees all of it as fragmented.
    let idle = NodeFree { cpu: 8000.0, gpus: smallvec![1000, 1000] };
    assert_eq!(frag_of(&workload, |i| i == 0, &idle), 0.5 * 2000.0);
    // Nothing free, nothing fragmented.
    assert_eq!(frag_of(&workload, |_| true, &NodeFree { cpu: 0.0, gpus: smallvec![0, 0] }), 0.0);
}

#[test]
fn a_fraction_goes_where_it_fragments_least() {
    let settings = Settings {
        weight: 1.0,
        popularity: 95.0,
        mode: Mode::Expected,
        resolution: 1.0,
        tie_break: TieBreak::BestFit,
        weighting: Weighting::Count,
    };
    let mut plugin = Fragmentation::new(settings);
    plugin.workload = vec![typical(1000.0, 1, 500, 0.5), typical(1000.0, 1, 1000, 0.5)];
    plugin.class_of = vec![0, 0];
    plugin.classes = vec![vec![true, true]];
    // A 0.5 pod: on node 0 it fills the card with 500 free (no new fragment); on node 1 it
    // would split an idle card, leaving 500 the whole-card request cannot use.
    let n0 = NodeFree { cpu: 8000.0, gpus: smallvec![500, 1000] };
    let n1 = NodeFree { cpu: 8000.0, gpus: smallvec![1000, 1000] };
    let place = |n: NodeId, free: &NodeFree| {
        let cards = free.choose(1, 500).unwrap();
        plugin.fragmentation(n, free) - plugin.fragmentation(n, &free.after(1000.0, 500, &cards))
    };
    assert!(place(NodeId(0), &n0) > place(NodeId(1), &n1));
}
