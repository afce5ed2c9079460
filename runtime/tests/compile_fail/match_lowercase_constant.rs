#![allow(non_upper_case_globals)]
// A lowercase module-level constant in a pattern is, in Rust, the constant
// (`three` matches 3 alone); the translation cannot see module items and
// would bind the name (every value matching). The attribute has rustc
// check each name the translation binds in a pattern: a constant (or a
// static, a unit struct) of that name is refused at the pattern.
#[parloop::device]
const three: i32 = 3;

const seven: u64 = 7;

#[parloop::kernel]
fn pick(x: &i32, o: &mut i32) {
    *o = match *x {
        three => 100,
        _ => 7,
    };
}

// The same through `matches!` and `if let` (a `match` in the translation).
#[parloop::kernel]
fn sugar(x: &u64, o: &mut u64) {
    *o = if matches!(*x, seven) { 1 } else { 0 };
    if let seven = *x {
        *o += 2;
    }
}

fn main() {}
