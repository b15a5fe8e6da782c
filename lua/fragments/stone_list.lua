-- fragment stone_list: the tombstone list, the value an abandoned
-- acquisition's cleanup leaves in a single-holder lease (a lock key:
-- lock_abandon, lock_fifo_abandon; a field lease's field: lease_abandon;
-- a fencing lease's owner field: fencing_abandon), written in two sections:
-- read (the function stones, for every script that meets a list) and add
-- (the function stone_add, for the cleanups that write one). Each section
-- is a local function, a closure built on each run that reaches it:
-- included only on the rare paths that meet a tombstone, so that no other
-- path pays for it. The list's layout in Go: internal/layout's Tombstones.
--#section read
-- stone_list.read: the function stones(v, token) that reads a tombstone
-- list, the value an abandoned acquisition's cleanup leaves in a
-- single-holder lease: one to 8 entries, oldest first, each an owner
-- token followed by '!' ('tokA!' or 'tokA!tokB!'), an owner token being
-- 22 bytes of base64url (as engine.NewToken makes them) or the 36 bytes of
-- lower-case hex and '-' of earlier versions. v must end with '!'.
-- Returns the number of entries and whether token is one of them; 0 and
-- false when v is not such a list (an entry that is not an owner token,
-- or more than 8 entries).
local function stones(v, token)
  local n, mine, i = 0, false, 1
  while i <= #v do
    local j = string.find(v, '!', i, true)
    local t = string.sub(v, i, j - 1)
    if n == 8 or not ((#t == 22 and not string.find(t, '[^%w_%-]'))
        or (#t == 36 and string.match(t, '^[0-9a-f]+%-[0-9a-f]+%-[0-9a-f]+%-[0-9a-f]+%-[0-9a-f]+$')
          and string.byte(t, 9) == 45 and string.byte(t, 14) == 45 and string.byte(t, 19) == 45 and string.byte(t, 24) == 45)) then
      return 0, false
    end
    if t == token then
      mine = true
    end
    n = n + 1
    i = j + 1
  end
  return n, mine
end
--#section add
-- stone_list.add: the function stone_add(v, token) that returns the
-- tombstone list v (a list stones accepted, token not among its entries)
-- with token's entry, token followed by '!', added last, the first
-- (oldest) entry dropped when v already holds 8. The caller reads v,
-- writes the result and gives the key or field the longer of its
-- remaining TTL and the new tombstone's life.
local function stone_add(v, token)
  local _, n = string.gsub(v, '!', '!')
  if n >= 8 then
    v = string.sub(v, string.find(v, '!', 1, true) + 1)
  end
  return v .. token .. '!'
end
