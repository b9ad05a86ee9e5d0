fn main() {
    let name = std::env::args().nth(1).unwrap_or("fill-1k".into());
    let case = volcano_benches::workloads::Case::from_name(&name).unwrap();
    let r = volcano_benches::runner::run_case(case);
    println!("{}", serde_json::to_string(&r).unwrap());
}
