// `.into()`'s target is a type the translation cannot see.

#[parloop::kernel]
fn widen(a: &f32, o: &mut f64) {
    *o = (*a).into();
}

fn main() {}
