// A block operand's statements would run before `&&` decides.

#[parloop::kernel]
fn guarded(a: &i32, b: &i32, o: &mut i32) {
    let big = *b != 0 && {
        let q = *a / *b;
        q > 2
    };
    *o = if big { 1 } else { 0 };
}

fn main() {}
