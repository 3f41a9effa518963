//! The CUDA benchmark without the CLI:
//! `cuda_bench [--quick] [--sizes 256,512,...] [--e2e-slices N]`.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let sizes: Vec<usize> = value("--sizes")
        .map(|s| s.split(',').filter_map(|v| v.trim().parse().ok()).collect())
        .unwrap_or_default();
    let mut cfg = if quick {
        tomors_cuda::bench::BenchConfig::quick(&sizes)
    } else {
        tomors_cuda::bench::BenchConfig::full(&sizes)
    };
    if let Some(k) = value("--e2e-slices").and_then(|v| v.parse().ok()) {
        cfg.e2e_slices = k;
    }
    if let Some(d) = value("--devices") {
        cfg.devices = d.split(',').filter_map(|v| v.trim().parse().ok()).collect();
    }
    if let Some(d) = value("--e2e-size").and_then(|v| v.parse().ok()) {
        cfg.e2e_size = d;
    }
    if args.iter().any(|a| a == "--e2e-only") {
        cfg.sweep.clear();
        cfg.size = 0;
    }
    match tomors_cuda::bench::run(&cfg) {
        Ok(r) => println!("{r}"),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
