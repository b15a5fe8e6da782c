-- fragment stone_list: the function stones(v, token) that reads a
-- tombstone list, the value an abandoned acquisition's cleanup leaves in a
-- single-holder lease (lease_abandon, fencing_abandon): one to 8 entries,
-- oldest first, each an owner token followed by '!' ('tokA!' or
-- 'tokA!tokB!'), an owner token being 22 bytes of base64url (as
-- engine.NewToken makes them) or the 36 bytes of lower-case hex and '-' of
-- earlier versions. v must end with '!'. Returns the number of entries and
-- whether token is one of them; 0 and false when v is not such a list (an
-- entry that is not an owner token, or more than 8 entries). Included only
-- on the rare paths that meet a tombstone, so that no other path pays for
-- the function.
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
