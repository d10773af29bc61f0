//! The one list of reproduced papers, in the order `reproduce all` runs them. Adding a paper
//! is its folder beside this file, one line here and its page in the report crate.

use crate::Reproduction;

/// Every registered paper (Fujita & Mori first).
pub static PAPERS: &[Reproduction] = &[
    Reproduction::of::<crate::fujita2008::Fujita2008>(),
    Reproduction::of::<crate::yassour2010::Yassour2010>(),
    Reproduction::of::<crate::benyehuda2007::BenYehuda2007>(),
    Reproduction::of::<crate::iosup::Iosup>(),
    Reproduction::of::<crate::expether::ExpEther>(),
    Reproduction::of::<crate::peleg2015::Peleg2015>(),
];
