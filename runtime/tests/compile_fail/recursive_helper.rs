// A helper that calls itself: refused by the translation with a message
// naming the recursion (rustc's own error was a cycle in `DEVICE`).

#[parloop::device]
fn fact(n: i64) -> i64 {
    if n <= 1 {
        1
    } else {
        n * fact(n - 1)
    }
}

#[parloop::kernel]
fn factorials(n: &i64, o: &mut i64) {
    *o = fact(*n);
}

fn main() {}
