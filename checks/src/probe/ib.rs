//! InfiniBand / RoCE devices and ports from /sys/class/infiniband.

use crate::model::IbFacts;
use crate::root::Root;

pub fn probe(_root: &Root) -> IbFacts {
    IbFacts::default()
}
