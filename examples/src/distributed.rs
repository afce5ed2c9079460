//! What the FEM demos need to run under MPI: `--partition METHOD` starts
//! MPI (feature `mpi`; `mpiexec -n N wave --partition metis`), the
//! [`Distribute`](crate::Distribute) step partitions the cells with that
//! method, and [`whole`] gathers a result on rank 0 for printing and
//! output. Without the feature, `--partition` is an error that says how to
//! build with it.

use parloop::{Dat, Error, Runtime};
use parloop_mesh::DeclaredMesh;

/// MPI for the run's duration (finalised when dropped), when started.
pub struct Launch {
    #[cfg(feature = "mpi")]
    _universe: Option<parloop::mpi::Universe>,
}

/// Starts MPI when `partition` (a `--partition` value) is given; `demo`
/// names the binary in the error of a build without the `mpi` feature.
pub fn launch(partition: Option<&str>, demo: &str) -> Result<Launch, Error> {
    #[cfg(feature = "mpi")]
    {
        let _ = demo;
        Ok(Launch { _universe: partition.map(|_| parloop::mpi::initialize()).transpose()? })
    }
    #[cfg(not(feature = "mpi"))]
    match partition {
        Some(_) => Err(Error::Distributed {
            rank: 0,
            reason: format!(
                "--partition needs the mpi feature: cargo build --release -p parloop-examples --features mpi --bin {demo}"
            ),
        }),
        None => Ok(Launch {}),
    }
}

/// The step that partitions a demo's cells (through the cell -> vertex
/// map) with `method` (`metis` or `block`), or does nothing without one.
pub fn partition<'a>(rt: &'a Runtime, method: Option<&'a str>) -> impl Fn(&DeclaredMesh) -> Result<(), Error> + 'a {
    move |m: &DeclaredMesh| {
        let Some(method) = method else { return Ok(()) };
        #[cfg(feature = "mpi")]
        {
            let partitioner = match method {
                "metis" => parloop::mpi::Partitioner::Metis,
                "block" => parloop::mpi::Partitioner::Block,
                other => {
                    return Err(Error::Distributed {
                        rank: rt.rank(),
                        reason: format!("--partition {other}: expected metis or block"),
                    })
                }
            };
            rt.partition(&m.cells, &m.cell_vertices, partitioner).map(drop)
        }
        #[cfg(not(feature = "mpi"))]
        {
            let _ = (rt, m);
            Err(Error::Distributed { rank: 0, reason: format!("--partition {method} needs the mpi feature") })
        }
    }
}

/// `dat`'s values in the mesh's numbering: the values themselves in a
/// serial run; in a distributed one, gathered on rank 0 (`None` on the
/// other ranks). Collective under MPI: every rank calls it.
pub fn whole(dat: &Dat<f64>) -> Result<Option<Vec<f64>>, Error> {
    if !dat.set().is_distributed() {
        return dat.values().map(Some);
    }
    #[cfg(feature = "mpi")]
    return dat.gather(0);
    #[cfg(not(feature = "mpi"))]
    Err(Error::Distributed { rank: 0, reason: format!("dat `{}` is distributed without MPI", dat.name()) })
}
