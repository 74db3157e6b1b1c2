-- The sandbox every script runs in, set up once per VM after the libraries are in place.
--
-- Redis 7's Lua has read-only tables; stock Lua 5.1 does not, so they are made here: the
-- globals table becomes an empty proxy over the real globals (`backing`, returned to Rust,
-- where KEYS and ARGV are put per run), and every library table a script can reach (redis,
-- bit, cjson, cmsgpack, struct, string, math, table, and the string metatable's __index) is
-- an empty proxy over the real one. A proxy's __newindex refuses, and the base functions
-- that write or read tables raw (rawset, rawget, setmetatable, next, pairs, ipairs,
-- table.insert/remove/sort) refuse or see through proxies. So no script can change what
-- another script (of any tenant) runs, as Redis refuses it: "Attempt to modify a readonly
-- table".
local killed = ...
local G = _G
local rawset, rawget, setmetatable, getmetatable, next, ipairs, type, error, tostring =
      rawset, rawget, setmetatable, getmetatable, next, ipairs, type, error, tostring

-- proxy -> the table it shows (weak keys: nothing here keeps a proxy alive).
local shows = setmetatable({}, { __mode = "k" })

-- A base function refusing (rawset, setmetatable…): like Redis's C functions, no position.
local function refuse()
    error("Attempt to modify a readonly table", 0)
end

local function refuse_set()
    error("Attempt to modify a readonly table", 2)
end

-- What getmetatable() of a proxy returns: read-only itself, and no way to the real table.
local hidden_meta = {}
setmetatable(hidden_meta, { __newindex = refuse_set, __metatable = false })
shows[hidden_meta] = {}

local function protect(t)
    local proxy = {}
    shows[proxy] = t
    setmetatable(proxy, { __index = t, __newindex = refuse_set, __metatable = hidden_meta })
    return proxy
end

-- Move the globals into `backing`; _G stays the (now empty) globals table every chunk sees.
local backing = {}
local names = {}
for k in next, G do
    names[#names + 1] = k
end
for _, k in ipairs(names) do
    backing[k] = rawget(G, k)
    rawset(G, k, nil)
end

local protected = {}
for _, name in ipairs({ "redis", "bit", "cjson", "cmsgpack", "struct", "string", "math", "table" }) do
    if type(backing[name]) == "table" then
        protected[name] = protect(backing[name])
        backing[name] = protected[name]
    end
end

-- Strings index the protected string library; their metatable is out of reach.
local string_meta = getmetatable("")
string_meta.__index = protected.string
string_meta.__metatable = hidden_meta

local function real(t)
    if t == G then
        return backing
    end
    return shows[t]
end

backing.rawset = function(t, k, v)
    if t == G or shows[t] then
        refuse()
    end
    return rawset(t, k, v)
end
backing.rawget = function(t, k)
    local r = real(t)
    return rawget(r or t, k)
end
backing.setmetatable = function(t, m)
    if t == G or (type(t) == "table" and shows[t]) then
        refuse()
    end
    return setmetatable(t, m)
end
backing.next = function(t, k)
    return next(real(t) or t, k)
end
backing.pairs = function(t)
    return next, real(t) or t, nil
end
backing.ipairs = function(t)
    local r = real(t) or t
    return function(_, i)
        i = i + 1
        local v = r[i]
        if v ~= nil then
            return i, v
        end
    end, r, 0
end
local tablelib = shows[protected.table]
for _, name in ipairs({ "insert", "remove", "sort" }) do
    local raw = tablelib[name]
    tablelib[name] = function(t, ...)
        if t == G or shows[t] then
            refuse()
        end
        return raw(t, ...)
    end
end

-- Bytecode is never loaded (Redis refuses it since CVE-2015-4335: a crafted chunk can
-- corrupt the VM): loadstring and load answer nil and a message for a binary chunk.
local loadstring_text, concat, byte = backing.loadstring, shows[protected.table].concat, shows[protected.string].byte
local function load_text(code, name)
    if type(code) == "string" and byte(code, 1) == 27 then
        return nil, "Bytecode loading is not allowed"
    end
    return loadstring_text(code, name)
end
backing.loadstring = load_text
backing.load = function(reader, name)
    local parts = {}
    while true do
        local piece = reader()
        if piece == nil or piece == "" then
            break
        end
        if type(piece) ~= "string" then
            return nil, "reader function must return a string"
        end
        parts[#parts + 1] = piece
    end
    return load_text(concat(parts), name or "=(load)")
end

-- pcall and xpcall do not catch SCRIPT KILL's error: once the script is to stop, an error
-- they caught goes on up (Redis gets there by raising it again on every line).
local pcall_raw, xpcall_raw = backing.pcall, backing.xpcall
local function passed(ok, ...)
    if not ok and killed() then
        error((...), 0)
    end
    return ok, ...
end
backing.pcall = function(f, ...)
    return passed(pcall_raw(f, ...))
end
backing.xpcall = function(f, handler)
    return passed(xpcall_raw(f, handler))
end

backing._G = G
setmetatable(backing, {
    __index = function(_, k)
        error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
    end,
})
setmetatable(G, { __index = backing, __newindex = refuse_set, __metatable = hidden_meta })
return backing
