//! Xen PV page types (S3.1): every guest frame has a type and a type reference count; a
//! frame's type changes only when its count is 0; page tables are validated before they
//! get their type and may be pinned (validated once, kept typed while pinned).
//!
//! A frame is *writable* (the guest and its devices may write it), an L1–L4 page table or a
//! segment descriptor table (nobody but Xen may write it), or *none* (not in use). Xen's
//! `get_page_type`/`put_page_type` are [`PageTypes::get_type`]/[`PageTypes::put_type`].

use serde::{Deserialize, Serialize};

use iommulab_base::addr::{Gpa, Pfn};

use super::XenError;

/// A frame's type (S3.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PageType {
    /// Not in use by anything that needs a type.
    #[default]
    None,
    /// Ordinary memory: the guest and its assigned devices may write it.
    Writable,
    /// A level-1 page table (PAE: the PTE pages).
    L1,
    /// A level-2 page table (PAE: the PMD pages).
    L2,
    /// A level-3 page table (PAE: the PGD).
    L3,
    /// A level-4 page table (64-bit guests).
    L4,
    /// A segment descriptor table (GDT/LDT).
    SegDesc,
}

impl PageType {
    /// Whether devices must not reach a frame of this type (S3.3): page tables and
    /// descriptor tables.
    pub const fn protected(self) -> bool {
        matches!(
            self,
            PageType::L1 | PageType::L2 | PageType::L3 | PageType::L4 | PageType::SegDesc
        )
    }

    /// The page-table level (1–4), if this is a page table.
    pub const fn level(self) -> Option<u8> {
        match self {
            PageType::L1 => Some(1),
            PageType::L2 => Some(2),
            PageType::L3 => Some(3),
            PageType::L4 => Some(4),
            _ => None,
        }
    }
}

/// What a frame holds now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameType {
    /// The type.
    pub ty: PageType,
    /// References to the frame as that type.
    pub count: u32,
    /// Pinned: kept typed (and validated) with no reference (page tables only).
    pub pinned: bool,
}

/// The type of each frame of one guest's memory.
#[derive(Clone, Debug)]
pub struct PageTypes {
    frames: Vec<FrameType>,
}

/// A type change [`PageTypes::get_type`] or [`PageTypes::put_type`] made (what Xen must
/// mirror in the I/O page tables, S3.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TypeChange {
    /// The frame.
    pub frame: Pfn<Gpa>,
    /// Its type before.
    pub from: PageType,
    /// Its type after.
    pub to: PageType,
}

impl PageTypes {
    /// `frames` guest frames, all of type none.
    pub fn new(frames: u64) -> Self {
        Self {
            frames: vec![FrameType::default(); usize::try_from(frames).unwrap_or(usize::MAX)],
        }
    }

    /// Guest frames.
    pub fn len(&self) -> u64 {
        self.frames.len() as u64
    }

    /// Whether the guest has no memory.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    fn index(&self, frame: Pfn<Gpa>) -> Result<usize, XenError> {
        usize::try_from(frame.get())
            .ok()
            .filter(|&i| i < self.frames.len())
            .ok_or(XenError::OutsideGuest {
                frame: frame.get(),
                frames: self.len(),
            })
    }

    /// What `frame` holds.
    pub fn get(&self, frame: Pfn<Gpa>) -> Result<FrameType, XenError> {
        Ok(self.frames[self.index(frame)?])
    }

    /// Takes a reference to `frame` as type `want` (Xen's `get_page_type`). The type
    /// changes only when the count is 0 and the frame is not pinned; otherwise `want` must
    /// be the frame's type. Returns the change when the type changed. On error nothing
    /// changes.
    pub fn get_type(
        &mut self,
        frame: Pfn<Gpa>,
        want: PageType,
    ) -> Result<Option<TypeChange>, XenError> {
        let i = self.index(frame)?;
        let f = self.frames[i];
        if f.ty == want {
            self.frames[i].count = f
                .count
                .checked_add(1)
                .ok_or(XenError::CountOverflow { frame: frame.get() })?;
            return Ok(None);
        }
        if f.count > 0 || f.pinned {
            return Err(XenError::TypeBusy {
                frame: frame.get(),
                have: f.ty,
                want,
                count: f.count,
            });
        }
        self.frames[i] = FrameType {
            ty: want,
            count: 1,
            pinned: false,
        };
        Ok(Some(TypeChange {
            frame,
            from: f.ty,
            to: want,
        }))
    }

    /// Drops a reference to `frame` (Xen's `put_page_type`). At count 0 an unpinned
    /// frame keeps its type until the next `get_type` of another type (as Xen does: the
    /// type is only changed on demand). Errors when there is no reference to drop.
    pub fn put_type(&mut self, frame: Pfn<Gpa>) -> Result<(), XenError> {
        let i = self.index(frame)?;
        let c = &mut self.frames[i].count;
        *c = c
            .checked_sub(1)
            .ok_or(XenError::CountUnderflow { frame: frame.get() })?;
        Ok(())
    }

    /// Validates `entries` (the frames a new page table at `frame` points to) and gives
    /// `frame` the page-table type `ty` pinned (Xen's `MMUEXT_PIN_Ln_TABLE`): every entry
    /// must lie inside the guest (S3.1: "if there exists an entry pointing to a machine
    /// page beyond the OS, then the update fails"). On error nothing changes.
    pub fn pin_table(
        &mut self,
        frame: Pfn<Gpa>,
        ty: PageType,
        entries: &[Pfn<Gpa>],
    ) -> Result<Option<TypeChange>, XenError> {
        if ty.level().is_none() {
            return Err(XenError::NotATable { ty });
        }
        self.index(frame)?;
        if let Some((slot, bad)) = entries
            .iter()
            .enumerate()
            .find(|(_, e)| e.get() >= self.len())
        {
            return Err(XenError::BadEntry {
                table: frame.get(),
                slot,
                target: bad.get(),
            });
        }
        let change = self.get_type(frame, ty)?;
        let i = self.index(frame)?;
        self.frames[i].pinned = true;
        // The pin holds the frame typed; the reference taken to validate it is dropped.
        self.frames[i].count -= 1;
        Ok(change)
    }

    /// Unpins a page table (`MMUEXT_UNPIN_TABLE`): it keeps its type until it is next
    /// used as something else.
    pub fn unpin(&mut self, frame: Pfn<Gpa>) -> Result<(), XenError> {
        let i = self.index(frame)?;
        if !self.frames[i].pinned {
            return Err(XenError::NotPinned { frame: frame.get() });
        }
        self.frames[i].pinned = false;
        Ok(())
    }

    /// Frames of a type, counted (tests and reports).
    pub fn count_of(&self, ty: PageType) -> u64 {
        self.frames.iter().filter(|f| f.ty == ty).count() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(x: u64) -> Pfn<Gpa> {
        Pfn::new(x)
    }

    #[test]
    fn a_type_changes_only_at_count_zero() {
        let mut t = PageTypes::new(16);
        assert!(t.get_type(f(3), PageType::Writable).unwrap().is_some());
        assert_eq!(t.get_type(f(3), PageType::Writable).unwrap(), None);
        let busy = t.get_type(f(3), PageType::L1).unwrap_err();
        assert!(
            matches!(busy, XenError::TypeBusy { count: 2, .. }),
            "{busy}"
        );
        t.put_type(f(3)).unwrap();
        t.put_type(f(3)).unwrap();
        let c = t.get_type(f(3), PageType::L1).unwrap().unwrap();
        assert_eq!((c.from, c.to), (PageType::Writable, PageType::L1));
        assert!(matches!(
            t.put_type(f(5)),
            Err(XenError::CountUnderflow { frame: 5 })
        ));
    }

    #[test]
    fn a_bad_entry_refuses_the_table_and_changes_nothing() {
        let mut t = PageTypes::new(16);
        let before = t.get(f(2)).unwrap();
        let e = t.pin_table(f(2), PageType::L1, &[f(1), f(99)]).unwrap_err();
        assert_eq!(
            e,
            XenError::BadEntry {
                table: 2,
                slot: 1,
                target: 99
            }
        );
        assert!(e.to_string().contains("slot 1"), "{e}");
        assert_eq!(t.get(f(2)).unwrap(), before);
        t.pin_table(f(2), PageType::L1, &[f(1), f(15)]).unwrap();
        let now = t.get(f(2)).unwrap();
        assert_eq!((now.ty, now.count, now.pinned), (PageType::L1, 0, true));
        // Pinned: the type cannot change until unpinned.
        assert!(t.get_type(f(2), PageType::Writable).is_err());
        t.unpin(f(2)).unwrap();
        assert!(t.get_type(f(2), PageType::Writable).unwrap().is_some());
        assert!(matches!(
            t.get(f(16)),
            Err(XenError::OutsideGuest { frame: 16, .. })
        ));
    }
}
