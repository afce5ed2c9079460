// C++ would count with the variable itself: changing it changed the
// iteration on the device.

#[parloop::kernel]
fn doubled(o: &mut f64) {
    let mut s = 0.0;
    for mut i in 0..4 {
        i *= 2;
        s += i as f64;
    }
    *o = s;
}

fn main() {}
