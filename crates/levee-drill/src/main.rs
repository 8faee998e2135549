//! `levee-drill`: prove a Levee configuration against scripted provider faults.

fn main() {
    println!("levee-drill: nothing here yet");
}
