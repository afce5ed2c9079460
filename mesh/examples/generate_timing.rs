//! Times the generators at the sizes docs/PERFORMANCE.md reports:
//! `cargo run --release -p parloop-mesh --example generate_timing [N]`.

use std::time::Instant;

fn main() -> Result<(), parloop::Error> {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(125);
    for _ in 0..3 {
        let t = Instant::now();
        let cube = parloop_mesh::unit_cube(n, n, n)?;
        let cube_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let square = parloop_mesh::unit_square(8 * n, 8 * n)?;
        let square_s = t.elapsed().as_secs_f64();
        println!(
            "unit_cube({n}, {n}, {n}): {} vertices, {} tetrahedra, {} facets in {cube_s:.3} s; \
             unit_square({m}, {m}): {} triangles in {square_s:.3} s",
            cube.vertices(),
            cube.num_cells(),
            cube.num_facets(),
            square.num_cells(),
            m = 8 * n,
        );
    }
    Ok(())
}
