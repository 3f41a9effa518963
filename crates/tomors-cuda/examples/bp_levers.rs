//! Measurements for the 2048³ FBP target (issue 15, part 3); see
//! `docs/perf-notes.md`. Each section runs when its flag is given:
//!
//! `bp_levers [--n 2048] [--reps 5]
//!   [--rates 'KERNEL[:interp];...' --slices 8,12,32]
//!   [--compare 'KERNEL[:interp]=REFERENCE[:interp];...' --compare-slices 4]
//!   [--e2e 'KERNEL[:interp][/SLAB];...' --e2e-slices 256 --warm 32 [--serial-filter]]`
//!
//! KERNEL is any `--kernel` name of the CLI with `@` parameters (e.g.
//! `alu-float2@t64,s16,a1,r1,b2`); SLAB 0 or absent = automatic;
//! `--serial-filter` filters on the compute stream (no overlap with the back
//! projection, for comparisons).

use tomors_cuda::bench::levers;

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn list(v: &Option<String>) -> Vec<String> {
    v.as_deref()
        .map(|s| {
            s.split(';')
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

fn numbers(v: Option<String>, default: &[usize]) -> Vec<usize> {
    v.map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| default.to_vec())
}

fn run() -> tomors_cuda::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let n = numbers(value("--n"), &[2048])[0];
    let reps = numbers(value("--reps"), &[5])[0];
    let device = numbers(value("--device"), &[0])[0];
    let rates = list(&value("--rates"));
    if !rates.is_empty() {
        let cases = rates
            .iter()
            .map(|s| levers::parse_case(s))
            .collect::<tomors_cuda::Result<Vec<_>>>()?;
        let slices = numbers(value("--slices"), &[8, 12, 32]);
        let rows = levers::kernel_rates(device, &cases, n, &slices, reps)?;
        println!("kernel rates, {n} bins x {n} angles -> {n}^2, median of {reps}:");
        println!(
            "{:<44} {:<8} {:>6} {:>10} {:>9}",
            "kernel", "interp", "slices", "ms", "GU/s"
        );
        for r in &rows {
            println!(
                "{:<44} {:<8} {:>6} {:>10.3} {:>9.1}",
                r.kernel,
                r.interp.to_string(),
                r.slices,
                r.ms,
                r.gups
            );
        }
    }
    let k = numbers(value("--compare-slices"), &[4])[0];
    for pair in list(&value("--compare")) {
        let (a, b) = pair.split_once('=').ok_or_else(|| {
            tomors_cuda::CudaError::Parameter(format!("compare '{pair}': use CASE=REFERENCE"))
        })?;
        let (ca, cb) = (levers::parse_case(a)?, levers::parse_case(b)?);
        let (bp, fbp) = levers::compare(device, ca, cb, n, k)?;
        println!(
            "compare {a} vs {b} ({k} random sinograms of {n}x{n}): back projection rel L2 {:.3e}, \
             max/gray range {:.3e}; FBP (Ram-Lak) rel L2 {:.3e}, max/gray range {:.3e}",
            bp.rel_l2, bp.max_over_range, fbp.rel_l2, fbp.max_over_range
        );
    }
    let slices = numbers(value("--e2e-slices"), &[256])[0];
    let warm = numbers(value("--warm"), &[32])[0];
    let specs = list(&value("--e2e"));
    let mut cases = Vec::new();
    for e in &specs {
        let (case, slab) = match e.rsplit_once('/') {
            Some((c, s)) => (c, s.parse().unwrap_or(0)),
            None => (e.as_str(), 0),
        };
        cases.push((levers::parse_case(case)?, slab));
    }
    if !cases.is_empty() {
        let serial = args.iter().any(|a| a == "--serial-filter");
        levers::e2e(
            device,
            &cases,
            n,
            slices,
            warm,
            serial,
            &mut |i, secs, st| {
                println!(
                "e2e FBP {slices} slices of {n}^2 from {n} angles, host to host, {}: {secs:.3} s \
                 ({:.1} GU/s overall; {st})",
                specs[i],
                (n * n * slices) as f64 * n as f64 / secs / 1e9
            );
            },
        )?;
    }
    Ok(())
}
