-- fragment rwlease_member: the caller's lease id (member, ARGV[1]) checked:
-- "R:<token>" for a reader, "W:<token>" for a writer. Sets kind ('R:' or
-- 'W:'); returns the COORD_BADARG error reply from the script otherwise,
-- before anything is read or written.
local kind = string.sub(member, 1, 2)
if (kind ~= 'R:' and kind ~= 'W:') or #member < 3 then
  return redis.error_reply('COORD_BADARG lease id is not R:<token> or W:<token>')
end
