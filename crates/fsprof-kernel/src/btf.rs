//! Just enough of the kernel's BTF (/sys/kernel/btf/vmlinux) to attach
//! fentry/fexit programs — a function's type id, how many arguments its
//! prototype has (fexit finds the return value after them in its context)
//! and what it returns — and to read kernel structs from raw tracepoint
//! programs: a struct member's offset and size, an enumerator's value.

/// Kinds used here (include/uapi/linux/btf.h).
const KIND_INT: u32 = 1;
const KIND_PTR: u32 = 2;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_ENUM: u32 = 6;
const KIND_TYPEDEF: u32 = 8;
const KIND_VOLATILE: u32 = 9;
const KIND_CONST: u32 = 10;
const KIND_RESTRICT: u32 = 11;
const KIND_FUNC: u32 = 12;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_TYPE_TAG: u32 = 18;
const KIND_ENUM64: u32 = 19;

/// Members [`Btf::member`] looks at in one search, anonymous members'
/// included: far more than any kernel struct has.
const MEMBERS_LOOKED_AT: u32 = 1 << 14;

/// Where the kernel publishes its own BTF.
pub const VMLINUX: &str = "/sys/kernel/btf/vmlinux";

#[derive(Clone, Copy, Debug)]
struct Type {
    name_off: u32,
    kind: u32,
    vlen: u32,
    /// Members' `offset` holds a bitfield size and bit offset.
    kflag: bool,
    /// `size` or `type`, depending on the kind.
    size_type: u32,
    /// Offset of the kind-specific data after the 12-byte header.
    extra: usize,
}

/// The bytes of a BTF blob: the kernel's own, mapped (no copy: each
/// `read` of the sysfs file hands out 4 KiB, and copying the 5 MB into
/// fresh pages was most of what following page faults cost a short
/// `fsprof trace`), or any other, owned.
enum Blob {
    Owned(Vec<u8>),
    Mapped(memmap2::Mmap),
}

impl std::ops::Deref for Blob {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Blob::Owned(v) => v,
            Blob::Mapped(m) => m,
        }
    }
}

/// A parsed BTF blob. Type ids start at 1; index 0 stands for `void`.
pub struct Btf {
    data: Blob,
    strs: usize,
    /// Where the type section ends in `data`.
    end: usize,
    index: std::sync::Mutex<Index>,
}

/// Where each type's header is in the blob, found by walking the type
/// section from its start only as far as a question needs: each type's
/// length is in its header, so finding type N means walking the N - 1
/// before it. A kernel has ~125,000 types (1.3 ms to walk them all, most
/// of what following page faults cost `fsprof trace -- /bin/true` once
/// the blob was mapped); the structs asked about (`task_struct` is type
/// 114 here) come early, the functions fentry asks about last.
struct Index {
    /// Offsets of types 1, 2, ... (4 bytes each, decoded when asked for).
    offs: Vec<u32>,
    /// Where the walk goes on.
    next: usize,
}

/// Types handed out per lock of the index by [`Btf::all`].
const CHUNK: usize = 4096;

/// What a function returns, as fexit must read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ret {
    Void,
    /// An integer (or enum, bool) of this many bytes; sign-extended before
    /// use because only those low bytes of the return register are defined.
    Int(u32),
    /// A pointer: errors come back as ERR_PTR(-errno).
    Ptr,
}

/// A kernel function as fentry/fexit see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Func {
    pub name: String,
    /// BTF id of the FUNC: the program's `attach_btf_id`.
    pub id: u32,
    /// Parameter count of its prototype.
    pub nargs: u32,
    /// u64 context slots the arguments take: the context is a u64 array of
    /// the arguments, then (fexit only) the return value. One per argument,
    /// except a struct passed by value, which takes size/8 rounded up (as
    /// the kernel's trampoline lays it out).
    pub slots: u32,
    pub ret: Ret,
}

/// The kernel's BTF, mapped where the kernel allows it (Linux 6.16 on),
/// else read.
fn vmlinux_bytes() -> std::io::Result<Blob> {
    let f = std::fs::File::open(VMLINUX)?;
    // SAFETY: the kernel's BTF is read-only and never changes while it
    // runs. Private: the kernel refuses a shared mapping of it.
    match unsafe { memmap2::MmapOptions::new().map_copy_read_only(&f) } {
        Ok(m) => Ok(Blob::Mapped(m)),
        Err(_) => std::fs::read(VMLINUX).map(Blob::Owned),
    }
}

impl Btf {
    /// The running kernel's BTF, mapped (or read) and parsed once per
    /// process: a session asks it for fentry targets, block request and
    /// cgroup layouts and the fork follower's pid offset.
    pub fn vmlinux() -> Result<&'static Btf, String> {
        static VMLINUX_BTF: std::sync::OnceLock<Result<Btf, String>> = std::sync::OnceLock::new();
        VMLINUX_BTF
            .get_or_init(|| {
                let data = vmlinux_bytes().map_err(|e| {
                    format!("no kernel BTF ({VMLINUX}: {e}); fentry needs CONFIG_DEBUG_INFO_BTF")
                })?;
                Btf::parse_blob(data)
                    .ok_or_else(|| format!("{VMLINUX} is not BTF this parser understands"))
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    pub fn parse(data: Vec<u8>) -> Option<Btf> {
        Btf::parse_blob(Blob::Owned(data))
    }

    fn parse_blob(data: Blob) -> Option<Btf> {
        let u32_at = |o: usize| {
            data.get(o..o + 4)
                .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
        };
        if data.get(0..2)? != [0x9f, 0xeb] {
            return None;
        }
        let hdr_len = u32_at(4)? as usize;
        let (type_off, type_len) = (u32_at(8)? as usize, u32_at(12)? as usize);
        let str_off = u32_at(16)? as usize;
        let start = hdr_len + type_off;
        let end = start.checked_add(type_len)?.min(data.len());
        if end > u32::MAX as usize {
            return None;
        }
        Some(Btf {
            strs: hdr_len.checked_add(str_off)?,
            end,
            index: std::sync::Mutex::new(Index {
                offs: Vec::new(),
                next: start,
            }),
            data,
        })
    }

    /// Offsets of types `from + 1` to `from + n` (fewer at the end).
    fn offsets(&self, from: usize, n: usize) -> Vec<u32> {
        let mut ix = self.index.lock().unwrap_or_else(|e| e.into_inner());
        let want = from.saturating_add(n);
        let section = &self.data[..self.end];
        while ix.offs.len() < want {
            let p = ix.next;
            let Some(h) = section.get(p..p + 12) else {
                break;
            };
            let info = u32::from_le_bytes(h[4..8].try_into().unwrap());
            let vlen = (info & 0xffff) as usize;
            ix.offs.push(p as u32);
            ix.next = p
                + 12
                + match (info >> 24) & 0x1f {
                    1 | 14 | 17 => 4,
                    3 => 12,
                    4 | 5 | 15 | 19 => vlen * 12,
                    6 | 13 => vlen * 8,
                    _ => 0,
                };
        }
        ix.offs
            .get(from..want.min(ix.offs.len()))
            .unwrap_or(&[])
            .to_vec()
    }

    fn ty(&self, id: u32) -> Option<Type> {
        let i = id.checked_sub(1)? as usize;
        let p = *self.offsets(i, 1).first()?;
        self.decode(p as usize)
    }

    /// The type whose header is at `p` (a `types` entry: in bounds).
    fn decode(&self, p: usize) -> Option<Type> {
        let info = self.u32_at(p + 4)?;
        Some(Type {
            name_off: self.u32_at(p)?,
            kind: (info >> 24) & 0x1f,
            vlen: info & 0xffff,
            kflag: info >> 31 == 1,
            size_type: self.u32_at(p + 8)?,
            extra: p + 12,
        })
    }

    /// Every type with its id, in id order (the walk goes as far as the
    /// caller takes them).
    fn all(&self) -> impl Iterator<Item = (u32, Type)> + '_ {
        let mut from = 0;
        std::iter::from_fn(move || {
            let chunk = self.offsets(from, CHUNK);
            from += chunk.len();
            (!chunk.is_empty()).then_some(chunk)
        })
        .flatten()
        .zip(1u32..)
        .filter_map(|(p, id)| Some((id, self.decode(p as usize)?)))
    }

    fn name(&self, t: &Type) -> Option<&[u8]> {
        self.str_at(t.name_off)
    }

    /// The id of the FUNC named `func`.
    pub fn func_id(&self, func: &str) -> Option<u32> {
        self.all()
            .find(|(_, t)| t.kind == KIND_FUNC && self.name(t) == Some(func.as_bytes()))
            .map(|(id, _)| id)
    }

    /// `func` with its prototype's parameter count and return kind.
    pub fn func(&self, func: &str) -> Result<Func, String> {
        let id = self
            .func_id(func)
            .ok_or_else(|| format!("kernel BTF has no function {func}"))?;
        let proto = self
            .ty(id)
            .and_then(|f| self.ty(f.size_type))
            .filter(|p| p.kind == KIND_FUNC_PROTO)
            .ok_or_else(|| format!("BTF function {func} has no prototype"))?;
        let ret = self
            .ret_kind(proto.size_type)
            .ok_or_else(|| format!("{func} returns a type fexit cannot read"))?;
        let mut slots = 0;
        for i in 0..proto.vlen as usize {
            let ty = self
                .u32_at(proto.extra + 8 * i + 4)
                .ok_or_else(|| format!("BTF prototype of {func} is truncated"))?;
            slots += match self.skip_modifiers(ty) {
                Some(t) if t.kind == KIND_STRUCT || t.kind == KIND_UNION => {
                    t.size_type.div_ceil(8).max(1)
                }
                _ => 1,
            };
        }
        Ok(Func {
            name: func.into(),
            id,
            nargs: proto.vlen,
            slots,
            ret,
        })
    }

    /// Where `member` is in `struct strukt`: (byte offset, byte size),
    /// looking into anonymous struct and union members as C does. `None`
    /// for a bitfield, an unknown struct or member.
    pub fn member(&self, strukt: &str, member: &str) -> Option<(u32, u32)> {
        let (_, t) = self.all().find(|(_, t)| {
            t.kind == KIND_STRUCT && t.vlen > 0 && self.name(t) == Some(strukt.as_bytes())
        })?;
        let mut budget = MEMBERS_LOOKED_AT;
        self.find_member(&t, member.as_bytes(), 0, &mut budget)
    }

    /// `member` in `t` or its anonymous members, looking at no more than
    /// `budget` members in all: anonymous members that refer to each other
    /// (a malformed blob) would otherwise be searched vlen^depth times.
    fn find_member(
        &self,
        t: &Type,
        member: &[u8],
        depth: u32,
        budget: &mut u32,
    ) -> Option<(u32, u32)> {
        if depth > 8 {
            return None;
        }
        for i in 0..t.vlen as usize {
            *budget = budget.checked_sub(1)?;
            let at = t.extra + 12 * i;
            let (name_off, ty, off) =
                (self.u32_at(at)?, self.u32_at(at + 4)?, self.u32_at(at + 8)?);
            let bits = if t.kflag { off & 0xff_ffff } else { off };
            let bitfield = t.kflag && off >> 24 != 0;
            let name = self.str_at(name_off)?;
            if name.is_empty() {
                let inner = self.skip_modifiers(ty)?;
                if matches!(inner.kind, KIND_STRUCT | KIND_UNION) {
                    if let Some((o, size)) = self.find_member(&inner, member, depth + 1, budget) {
                        return Some(((bits / 8).checked_add(o)?, size));
                    }
                }
            } else if name == member {
                if bitfield || bits % 8 != 0 {
                    return None;
                }
                return Some((bits / 8, self.size_of(ty)?));
            }
        }
        None
    }

    /// Size in bytes of a type (through typedefs and qualifiers).
    fn size_of(&self, id: u32) -> Option<u32> {
        let t = self.skip_modifiers(id)?;
        match t.kind {
            KIND_PTR => Some(8),
            KIND_INT | KIND_ENUM | KIND_ENUM64 | KIND_STRUCT | KIND_UNION => Some(t.size_type),
            _ => None,
        }
    }

    /// The value of the enumerator `name` (of whichever enum has it).
    pub fn enumerator(&self, name: &str) -> Option<i64> {
        for (_, t) in self.all() {
            let width = match t.kind {
                KIND_ENUM => 8,
                KIND_ENUM64 => 12,
                _ => continue,
            };
            for i in 0..t.vlen as usize {
                let at = t.extra + width * i;
                if self.str_at(self.u32_at(at)?)? != name.as_bytes() {
                    continue;
                }
                let lo = self.u32_at(at + 4)?;
                return Some(if width == 8 {
                    lo as i32 as i64
                } else {
                    ((self.u32_at(at + 8)? as u64) << 32 | lo as u64) as i64
                });
            }
        }
        None
    }

    fn str_at(&self, off: u32) -> Option<&[u8]> {
        let s = self.data.get(self.strs + off as usize..)?;
        let end = s.iter().position(|&b| b == 0)?;
        Some(&s[..end])
    }

    fn u32_at(&self, o: usize) -> Option<u32> {
        self.data
            .get(o..o + 4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
    }

    fn skip_modifiers(&self, mut id: u32) -> Option<Type> {
        for _ in 0..32 {
            let t = self.ty(id)?;
            match t.kind {
                KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG => {
                    id = t.size_type
                }
                _ => return Some(t),
            }
        }
        None
    }

    fn ret_kind(&self, mut id: u32) -> Option<Ret> {
        // Modifier chains are short; the bound only guards against a
        // malformed cycle.
        for _ in 0..32 {
            if id == 0 {
                return Some(Ret::Void);
            }
            let t = self.ty(id)?;
            match t.kind {
                KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG => {
                    id = t.size_type
                }
                KIND_INT | KIND_ENUM | KIND_ENUM64 if matches!(t.size_type, 1 | 2 | 4 | 8) => {
                    return Some(Ret::Int(t.size_type))
                }
                KIND_PTR => return Some(Ret::Ptr),
                _ => return None,
            }
        }
        None
    }
}

/// A hand-built BTF blob for tests: `(name, params, ret)` functions where
/// `ret` is "void", "int", "long" or "ptr", optionally with "+struct" for a
/// first parameter that is a 24-byte struct passed by value.
pub fn synthetic(funcs: &[(&str, u32, &str)]) -> Vec<u8> {
    let mut strs = vec![0u8];
    let mut types: Vec<u8> = Vec::new();
    let mut push = |name_off: u32, kind: u32, vlen: u32, st: u32, extra: &[u8]| {
        types.extend(name_off.to_le_bytes());
        types.extend(((kind << 24) | vlen).to_le_bytes());
        types.extend(st.to_le_bytes());
        types.extend(extra);
    };
    // 1: int (4 bytes), 2: long (8), 3: typedef ssize_t -> long, 4: void *,
    // 5: a 24-byte struct with no members
    push(0, KIND_INT, 0, 4, &(32u32 | (1 << 24)).to_le_bytes());
    push(0, KIND_INT, 0, 8, &(64u32 | (1 << 24)).to_le_bytes());
    push(0, KIND_TYPEDEF, 0, 2, &[]);
    push(0, KIND_PTR, 0, 0, &[]);
    push(0, KIND_STRUCT, 0, 24, &[]);
    let mut id = 6u32;
    for (name, nargs, ret) in funcs {
        // "int+struct": an int return and the first argument a struct by value.
        let (ret, by_value) = match ret.strip_suffix("+struct") {
            Some(r) => (r, true),
            None => (*ret, false),
        };
        let ret_id = match ret {
            "void" => 0,
            "int" => 1,
            "long" => 3,
            _ => 4,
        };
        let params: Vec<u8> = (0..*nargs)
            .flat_map(|i| {
                let ty = if by_value && i == 0 { 5u32 } else { 4 };
                [0u32.to_le_bytes(), ty.to_le_bytes()].concat()
            })
            .collect();
        push(0, KIND_FUNC_PROTO, *nargs, ret_id, &params);
        let off = strs.len() as u32;
        strs.extend(name.as_bytes());
        strs.push(0);
        push(off, KIND_FUNC, 1, id, &[]);
        id += 2;
    }
    blob(&types, &strs)
}

/// A BTF blob of the given type and string sections: the 24-byte header
/// (magic 0xeb9f, version 1), then the types, then the strings.
pub fn blob(types: &[u8], strs: &[u8]) -> Vec<u8> {
    let mut b = vec![0x9f, 0xeb, 1, 0];
    b.extend(24u32.to_le_bytes());
    b.extend(0u32.to_le_bytes());
    b.extend((types.len() as u32).to_le_bytes());
    b.extend((types.len() as u32).to_le_bytes());
    b.extend((strs.len() as u32).to_le_bytes());
    b.extend(types);
    b.extend(strs);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prototypes_give_argument_counts_and_return_kinds() {
        let b = Btf::parse(synthetic(&[
            ("vfs_read", 4, "long"),
            ("iterate_dir", 2, "int"),
            ("lookup_fast", 1, "ptr"),
            ("noop", 0, "void"),
        ]))
        .unwrap();
        let f = b.func("vfs_read").unwrap();
        assert_eq!((f.id, f.nargs, f.slots, f.ret), (7, 4, 4, Ret::Int(8)));
        assert_eq!(b.func("iterate_dir").unwrap().nargs, 2);
        assert_eq!(b.func("iterate_dir").unwrap().ret, Ret::Int(4));
        assert_eq!(b.func("lookup_fast").unwrap().ret, Ret::Ptr);
        assert_eq!(b.func("noop").unwrap().ret, Ret::Void);
        assert!(b.func("nope").unwrap_err().contains("no function nope"));
        let b = Btf::parse(synthetic(&[("by_value", 2, "int+struct")])).unwrap();
        let f = b.func("by_value").unwrap();
        assert_eq!((f.nargs, f.slots), (2, 4), "24-byte struct = 3 slots");
        assert!(Btf::parse(b"junk".to_vec()).is_none());
    }

    /// struct request { int a; union { void *p; long l; }; long len; }
    /// (offsets 0, 8, 16) and enum { OP_READ = 0, OP_FLUSH = 2 }, by hand.
    fn struct_blob() -> Vec<u8> {
        let strs = b"\0request\0a\0p\0l\0len\0OP_READ\0OP_FLUSH\0".to_vec();
        let off = |name: &str, strs: &[u8]| {
            let pat = [name.as_bytes(), b"\0"].concat();
            (1..strs.len())
                .find(|&i| strs[i - 1] == 0 && strs[i..].starts_with(&pat))
                .unwrap() as u32
        };
        let mut t: Vec<u8> = Vec::new();
        let mut push = |words: &[u32]| t.extend(words.iter().flat_map(|w| w.to_le_bytes()));
        // 1: int, 2: long, 3: void *
        push(&[0, KIND_INT << 24, 4, 32]);
        push(&[0, KIND_INT << 24, 8, 64]);
        push(&[0, KIND_PTR << 24, 0]);
        // 4: the anonymous union { void *p; long l; }
        push(&[0, KIND_UNION << 24 | 2, 8]);
        push(&[off("p", &strs), 3, 0]);
        push(&[off("l", &strs), 2, 0]);
        // 5: struct request
        push(&[off("request", &strs), KIND_STRUCT << 24 | 3, 24]);
        push(&[off("a", &strs), 1, 0]);
        push(&[0, 4, 64]);
        push(&[off("len", &strs), 2, 128]);
        // 6: the enum
        push(&[0, KIND_ENUM << 24 | 2, 4]);
        push(&[off("OP_READ", &strs), 0]);
        push(&[off("OP_FLUSH", &strs), 2]);
        blob(&t, &strs)
    }

    /// A struct whose anonymous members are the struct itself: searched to
    /// the depth limit that is 16^8 members, unless the search is bounded.
    #[test]
    fn self_referring_anonymous_members_end_the_search() {
        let strs = b"\0s\0".to_vec();
        let mut t: Vec<u8> = Vec::new();
        let mut push = |words: &[u32]| t.extend(words.iter().flat_map(|w| w.to_le_bytes()));
        push(&[1, KIND_STRUCT << 24 | 16, 8]);
        for _ in 0..16 {
            push(&[0, 1, 0]);
        }
        let b = Btf::parse(blob(&t, &strs)).unwrap();
        let started = std::time::Instant::now();
        assert_eq!(b.member("s", "nope"), None);
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn struct_members_and_enumerators_are_found() {
        let b = Btf::parse(struct_blob()).unwrap();
        assert_eq!(b.member("request", "a"), Some((0, 4)));
        assert_eq!(
            b.member("request", "p"),
            Some((8, 8)),
            "inside the anonymous union"
        );
        assert_eq!(b.member("request", "l"), Some((8, 8)));
        assert_eq!(b.member("request", "len"), Some((16, 8)));
        assert_eq!(b.member("request", "nope"), None);
        assert_eq!(b.member("gendisk", "a"), None);
        assert_eq!(b.enumerator("OP_FLUSH"), Some(2));
        assert_eq!(b.enumerator("OP_READ"), Some(0));
        assert_eq!(b.enumerator("OP_NONE"), None);
    }
}
