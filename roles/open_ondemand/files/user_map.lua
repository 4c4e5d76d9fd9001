-- Managed by slurm-app-bundle. The account check for a portal without Open OnDemand: what OOD's
-- mod_ood_proxy does before it starts a user's portal. It runs OOD_USER_MAP_CMD with the
-- authenticated user (URL-escaped, as OOD passes it) and sends a user it maps to no cluster
-- account to OOD_MAP_FAIL_URI.
function user_map(r)
  local command = r.subprocess_env["OOD_USER_MAP_CMD"]
  local handle = io.popen(command .. " '" .. r:escape(r.user or "") .. "'")
  local account = handle:read("*l")
  handle:close()
  if account == nil or account == "" then
    r.headers_out["Location"] = r.subprocess_env["OOD_MAP_FAIL_URI"]
    return 302
  end
  r.subprocess_env["CLUSTER_ACCOUNT"] = account
  return apache2.DECLINED
end
