//! Typed ids for the fabric's parts, so that a port number cannot be used where a queue or a
//! switch is meant. Each is a `u32` (the event encoding and the packed structs hold them as
//! such); `NONE` marks "no such part" as `topology::NONE` does for plain numbers.

/// An index into one of the engine's arrays: what `PrecheckedVec` accepts.
pub trait Idx: Copy {
    fn index(self) -> usize;
}

impl Idx for usize {
    #[inline(always)]
    fn index(self) -> usize {
        self
    }
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[repr(transparent)]
        pub struct $name(pub u32);

        impl $name {
            pub const NONE: $name = $name(u32::MAX);

            #[inline(always)]
            pub fn is_none(self) -> bool {
                self.0 == u32::MAX
            }

            #[inline(always)]
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl Idx for $name {
            #[inline(always)]
            fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

id_type!(
    /// A port: HCA ports and switch ports numbered together (`Graph::port_base` + local number).
    PortId
);
id_type!(
    /// A packet FIFO: switch input (port, VL) queues first (`port * data_vls + vl`), then the
    /// HCAs' send queues.
    QueueId
);
id_type!(
    /// A switch, numbered from 0 (its node id less the host count).
    SwitchId
);
id_type!(
    /// A host (HCA), numbered from 0.
    HostId
);

impl QueueId {
    /// The input queue of `port` on VL `vl`, with `vls` data VLs per port.
    #[inline(always)]
    pub fn input(port: PortId, vl: u8, vls: u32) -> QueueId {
        QueueId(port.0 * vls + vl as u32)
    }
}
