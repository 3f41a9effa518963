//! Times one back-projection configuration (for `ncu` and quick checks):
//! `bp_one KERNEL [linear|nearest] [N] [SLICES] [REPS]`, e.g.
//! `bp_one alu-float2@t64,s16,a1,r1,b2 linear 2048 4 3` (GPU-resident
//! data, N bins × N angles → N², CUDA-event timing).

use tomors_cuda::bench::time_kernel;
use tomors_cuda::KernelChoice;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let run = || -> Result<(), String> {
        let cfg = match a.get(1).map(|s| s.parse::<KernelChoice>()) {
            Some(Ok(KernelChoice::Fixed(c))) => c,
            _ => return Err("usage: bp_one KERNEL [linear|nearest] [N] [SLICES] [REPS]".into()),
        };
        let interp = a.get(2).map_or(Ok(Default::default()), |s| s.parse())?;
        let num = |i: usize, d: usize| a.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
        let (n, slices, reps) = (num(3, 2048), num(4, 2 * cfg.mode.slices()), num(5, 3));
        let r = time_kernel(0, cfg, interp, n, slices, reps).map_err(|e| e.to_string())?;
        println!(
            "{} {interp} n {n} slices {slices}: {:.3} ms, {:.1} GU/s",
            r.kernel, r.ms, r.gups
        );
        Ok(())
    };
    if let Err(e) = run() {
        eprintln!("bp_one: {e}");
        std::process::exit(1);
    }
}
