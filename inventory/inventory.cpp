#include "inventory/inventory.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <unordered_set>

#include "host/log.h"
#include "inventory/workloads.h"

namespace keel::inv {

namespace {

constexpr uint32_t kWatchMask = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ONLYDIR;

std::string_view leaf_of(std::string_view path) { return path.substr(path.rfind('/') + 1); }

std::string child_path(const std::string& parent, std::string_view name) {
  std::string p = parent == "/" ? std::string() : parent;
  p += '/';
  p += name;
  return p;
}

struct Entry {
  std::string name;
  uint64_t inode = 0;
};

// The subdirectories of the directory `fd` (its cgroups), with their inodes, from one listing.
Result<std::vector<Entry>> list_dirs(int fd, const std::string& where) {
  std::vector<Entry> out;
  if (::lseek(fd, 0, SEEK_SET) < 0) return fail_errno("cannot list cgroup", where);
  alignas(struct dirent64) char buf[16384];
  for (;;) {
    ssize_t n = ::getdents64(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == ENOENT || errno == ENODEV)) return out;  // removed while listed
    if (n < 0) return fail_errno("cannot list cgroup", where);
    if (n == 0) return out;
    for (ssize_t off = 0; off < n;) {
      const auto* d = reinterpret_cast<const struct dirent64*>(buf + off);
      off += d->d_reclen;
      std::string_view name = d->d_name;
      if (name == "." || name == "..") continue;
      bool dir = d->d_type == DT_DIR;
      if (d->d_type == DT_UNKNOWN) {
        struct stat st;
        dir = ::fstatat(fd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
      }
      if (dir) out.push_back({std::string(name), static_cast<uint64_t>(d->d_ino)});
    }
  }
}

}  // namespace

Inventory::Inventory(Inventory&&) noexcept = default;
Inventory& Inventory::operator=(Inventory&&) noexcept = default;
Inventory::~Inventory() = default;

Result<Inventory> Inventory::open(const config::Spec& spec, const SysRoots& roots, Options options) {
  Inventory inv;
  inv.roots_ = roots;
  inv.spec_ = &spec;
  inv.options_ = options;
  inv.options_.refresh_ticks = std::max(1u, options.refresh_ticks);
  inv.options_.resync_ticks = std::max(1u, options.resync_ticks);
  if (inv.options_.open_files == 0) {
    rlimit r{};
    inv.options_.open_files = ::getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur != RLIM_INFINITY
                                  ? static_cast<size_t>(r.rlim_cur)
                                  : SIZE_MAX;
  }
  if (const size_t files = inv.options_.open_files; files != SIZE_MAX) {
    const size_t kept = std::min<size_t>(1024, files / 4);
    inv.options_.critical_reserve = std::min(inv.options_.critical_reserve, files / 8);
    const size_t room = files - kept - inv.options_.critical_reserve;
    if (room < inv.options_.max_cgroups) {
      inv.options_.max_cgroups = room;
      logging::line(logging::Level::warning,
                    "inventory: the open-files limit " + std::to_string(files) + " holds " +
                        std::to_string(room) + " cgroups (each is held open; " + std::to_string(kept) +
                        " files stay for the rest of keel, " + std::to_string(inv.options_.critical_reserve) +
                        " for cgroups a critical rule would take): more are left out; raise RLIMIT_NOFILE "
                        "(LimitNOFILE= under systemd)");
    }
  }
  auto layout = discover(roots);
  if (!layout) return std::unexpected(layout.error());
  inv.layout_ = std::move(*layout);
  auto defining = choose_hierarchy(inv.layout_, spec.hierarchy);
  if (!defining) return std::unexpected(defining.error());
  inv.defining_ = std::make_shared<const CgroupHierarchy>(std::move(*defining));
  if (inv.defining_->unified)
    inv.cpuset_ = inv.defining_->has("cpuset") ? inv.defining_.get() : nullptr;
  else
    inv.cpuset_ = inv.defining_->has("cpuset") ? inv.defining_.get() : inv.layout_.v1_with("cpuset");
  // The roots of the other v1 hierarchies keel reads (cpu, cpuacct, cpuset), held open.
  if (!inv.defining_->unified) {
    for (const char* c : {"cpu", "cpuacct", "cpuset"}) {
      const CgroupHierarchy* h = inv.layout_.v1_with(c);
      if (h == nullptr || h->id == inv.defining_->id || inv.root_of(*h)) continue;
      auto r = CgroupDir::open(*h, "/");
      if (!r) return std::unexpected(r.error());
      inv.roots_held_.push_back(std::make_unique<CgroupDir>(std::move(*r)));
    }
  }
  if (options.self) {
    inv.self_ = *options.self;
  } else if (auto self = process_cgroup_path(roots, ::getpid(), *inv.defining_)) {
    inv.self_ = std::move(*self);
  } else {
    logging::line(logging::Level::warning,
                  "inventory: keel's own cgroup is unknown, a rule may take it: " + self.error().message());
  }
  if (!inv.self_.empty() && inv.self_ != "/")
    logging::line(logging::Level::info, "inventory: keel's own cgroup " + inv.self_ + " is no rule's");
  if (inv.self_ == "/") inv.self_.clear();  // the root is never a workload's anyway
  std::vector<NamedMatch> named;
  for (const auto& w : spec.workloads) named.push_back({w.name, w.match, w.critical});
  inv.rules_ = MatchRules(std::move(named));
  inv.generations_.assign(inv.rules_.size(), UINT64_MAX);

  auto root = CgroupDir::open(inv.defining_, "/");
  if (!root)
    return fail("cannot open cgroup hierarchy root", inv.defining_->mount.string(), root.error().err);
  if (options.inotify) {
    inv.inotify_.reset(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
    inv.watching_ = inv.inotify_.valid() ? "inotify"
                                         : std::string("no inotify (") + std::strerror(errno) +
                                               "): every cgroup directory is re-listed each tick";
  } else {
    inv.watching_ = "every cgroup directory re-listed each tick";
  }
  inv.root_ = inv.add(nullptr, std::move(*root));
  if (auto r = inv.relist(inv.root_, /*deep=*/true); !r) return std::unexpected(r.error());
  inv.removed_.clear();
  inv.say_skipped();
  return inv;
}

const CgroupDir* Inventory::root_of(const CgroupHierarchy& h) const {
  if (h.unified == defining_->unified && h.id == defining_->id) return root_ ? &root_->dir : nullptr;
  for (const auto& r : roots_held_)
    if (r->hierarchy().id == h.id && r->hierarchy().unified == h.unified) return r.get();
  return nullptr;
}

const Node* Inventory::find(CgroupId id) const {
  auto it = nodes_.find(id);
  return it == nodes_.end() ? nullptr : &it->second;
}

std::vector<CgroupId> Inventory::take_removed() { return std::exchange(removed_, {}); }

bool Inventory::due(uint64_t last, CgroupId id, bool idle) const {
  const unsigned k = idle ? std::max(options_.refresh_ticks, options_.idle_ticks) : options_.refresh_ticks;
  return tick_ > last && (tick_ - last >= k || (tick_ + id.inode) % k == 0);
}

// ---- The tree ----

bool Inventory::admit(const Node& parent, const std::string& path) {
  if (auto why = beyond_walk_bounds(path)) {
    skipped_.add(*why, path);
    return false;
  }
  // Admission is not first come: whoever can make cgroups (a user with a systemd session, a container
  // with a delegated subtree) could fill the budget, and a critical container (re)started after that
  // would never be seen. A user's subtrees share half the budget; a cgroup a critical rule would take
  // comes in past a full one.
  const bool user =
      parent.trust == Trust::user || trust_of(parent.trust, path, CgroupDir::Delegation::none) == Trust::user;
  if (user && user_nodes_ >= options_.max_cgroups / 2) {
    skipped_.add(CgroupSkips::too_many, path);
    return false;
  }
  if (nodes_.size() >= options_.max_cgroups &&
      (nodes_.size() >= options_.max_cgroups + options_.critical_reserve ||
       !rules_.critical_could_take(path))) {
    skipped_.add(CgroupSkips::too_many, path);
    return false;
  }
  return true;
}

// Once per change of what is left out (its kinds, the first one), not every re-listing.
void Inventory::say_skipped() {
  std::string key;
  for (size_t n : skipped_.count) key += n > 0 ? '1' : '0';
  key += skipped_.example;
  if (key == skipped_said_) return;
  skipped_said_ = key;
  if (!skipped_.empty()) logging::line(logging::Level::warning, "inventory: " + skipped_.message());
}

Node* Inventory::add(Node* parent, CgroupDir dir) {
  const CgroupId id = dir.id();
  if (auto old = nodes_.find(id); old != nodes_.end()) remove(&old->second);  // moved: known again below
  if (auto old = by_path_.find(dir.path()); old != by_path_.end()) remove(old->second);
  Node& n = nodes_.emplace(id, Node(std::move(dir))).first->second;
  if (free_slots_.empty()) {
    n.slot = slots_++;
  } else {
    n.slot = free_slots_.back();
    free_slots_.pop_back();
  }
  tree_changed_ = true;
  n.parent = parent;
  if (parent == nullptr) {
    n.trust = trust_of(std::nullopt, n.dir.path(), CgroupDir::Delegation::none);
  } else {
    const auto own = parent->trust == Trust::user ? CgroupDir::Delegation::user  // no syscall below one
                                                  : n.dir.delegation();
    n.trust = trust_of(parent->trust, n.dir.path(), own);
  }
  if (parent != nullptr) parent->children.push_back(&n);
  if (n.trust == Trust::user) ++user_nodes_;
  by_path_.emplace(n.dir.path(), &n);
  watch(&n);
  return &n;
}

void Inventory::watch(Node* n) {
  if (!inotify_.valid()) return;
  std::filesystem::path dir =
      n->dir.path() == "/" ? defining_->mount : defining_->mount / n->dir.path().substr(1);
  int wd = ::inotify_add_watch(inotify_.get(), dir.c_str(), kWatchMask);
  if (wd >= 0) {
    n->watch = wd;
    by_watch_[wd] = n;
    return;
  }
  if (errno == ENOSPC || errno == ENOMEM) {
    // Out of watches (fs.inotify.max_user_watches): every directory is listed each tick instead.
    watching_ =
        "inotify watches ran out (fs.inotify.max_user_watches): every cgroup directory is re-listed each "
        "tick";
    for (auto& [w, node] : by_watch_) node->watch = -1;
    by_watch_.clear();
    inotify_.reset();
  }
}

void Inventory::remove(Node* top) {
  std::vector<Node*> order{top};  // the subtree, parents before children
  for (size_t i = 0; i < order.size(); ++i)
    for (Node* c : order[i]->children) order.push_back(c);
  if (top->parent != nullptr) std::erase(top->parent->children, top);
  if (top == root_) root_ = nullptr;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node* n = *it;
    if (n->watch >= 0) {
      if (inotify_.valid()) (void)::inotify_rm_watch(inotify_.get(), n->watch);
      by_watch_.erase(n->watch);
    }
    if (auto p = by_path_.find(n->dir.path()); p != by_path_.end() && p->second == n) by_path_.erase(p);
    removed_.push_back(n->dir.id());
    if (n->trust == Trust::user) --user_nodes_;
    free_slots_.push_back(n->slot);
    nodes_.erase(n->dir.id());
    tree_changed_ = true;
  }
}

// Brings `n`'s children in line with its directory: new ones added (and listed in turn), gone ones
// removed, one made again under a name replaced. `deep`: every known descendant is listed again too.
Result<void> Inventory::relist(Node* top, bool deep) {
  std::vector<CgroupId> todo{top->dir.id()};  // ids: a node listed later may be gone by then
  const CgroupId top_id = top->dir.id();
  if (top == root_ && deep) {
    skipped_ = CgroupSkips{};  // counted again over the whole tree
    skipped_.max_cgroups = options_.max_cgroups;
  }
  while (!todo.empty()) {
    auto found = nodes_.find(todo.back());
    todo.pop_back();
    if (found == nodes_.end()) continue;
    Node* n = &found->second;
    ++listings_;
    auto entries = list_dirs(n->dir.fd(), n->dir.file_path(CgroupFile::procs).parent_path().string());
    if (!entries) {
      if (n->dir.id() == top_id) return std::unexpected(entries.error());
      continue;
    }
    std::unordered_set<std::string_view> listed;
    for (const auto& e : *entries) listed.insert(e.name);
    std::vector<Node*> gone;
    for (Node* c : n->children)
      if (!listed.contains(leaf_of(c->dir.path()))) gone.push_back(c);
    for (Node* c : gone) remove(c);
    for (const auto& e : *entries) {
      const std::string path = child_path(n->dir.path(), e.name);
      auto known = by_path_.find(path);
      if (known != by_path_.end() && known->second->dir.id().inode == e.inode) {
        if (deep) todo.push_back(known->second->dir.id());
        continue;
      }
      if (known != by_path_.end()) remove(known->second);  // made again under its name
      if (!admit(*n, path)) continue;
      auto child = n->dir.child(e.name);
      if (!child) {  // gone since the listing, or not to be held
        if (child.error().err == EMFILE || child.error().err == ENFILE) ++unheld_;
        continue;
      }
      todo.push_back(add(n, std::move(*child))->dir.id());
    }
  }
  return {};
}

bool Inventory::drain_events() {
  alignas(struct inotify_event) char buf[65536];
  for (;;) {
    ssize_t len = ::read(inotify_.get(), buf, sizeof buf);
    if (len < 0 && errno == EINTR) continue;
    if (len <= 0) return true;  // EAGAIN: nothing more
    for (ssize_t off = 0; off < len;) {
      const auto* ev = reinterpret_cast<const struct inotify_event*>(buf + off);
      off += static_cast<ssize_t>(sizeof(struct inotify_event) + ev->len);
      if (ev->mask & IN_Q_OVERFLOW) return false;
      auto w = by_watch_.find(ev->wd);
      if (w == by_watch_.end()) continue;
      Node* parent = w->second;
      if (ev->mask & IN_IGNORED) {  // the directory itself went
        by_watch_.erase(w);
        parent->watch = -1;
        if (parent != root_) remove(parent);
        continue;
      }
      if (!(ev->mask & IN_ISDIR) || ev->len == 0) continue;
      const std::string path = child_path(parent->dir.path(), ev->name);
      auto known = by_path_.find(path);
      if (ev->mask & (IN_DELETE | IN_MOVED_FROM)) {
        if (known != by_path_.end()) remove(known->second);
        continue;
      }
      if (known == by_path_.end() && !admit(*parent, path)) continue;
      auto child = parent->dir.child(ev->name);  // IN_CREATE, IN_MOVED_TO
      if (!child) {
        if (child.error().err == EMFILE || child.error().err == ENFILE) ++unheld_;
        if (known != by_path_.end()) remove(known->second);
        continue;
      }
      if (known != by_path_.end() && known->second->dir.id() == child->id()) continue;
      Node* n = add(parent, std::move(*child));
      (void)relist(n, /*deep=*/true);  // what it holds already (made before its watch)
    }
  }
}

Result<void> Inventory::refresh_tree() {
  if (root_ == nullptr) return fail("the cgroup hierarchy's root is gone", defining_->mount.string(), ENOENT);
  ++tick_;
  bool resync = !inotify_.valid() || tick_ - synced_ >= options_.resync_ticks;
  if (inotify_.valid() && !drain_events()) resync = true;  // events were lost: look at everything
  if (resync) {
    if (auto r = relist(root_, /*deep=*/true); !r) {
      --tick_;
      return r;
    }
    synced_ = tick_;
  }
  say_skipped();
  return {};
}

// ---- Matching ----

bool Inventory::holds_tasks(Node& n, const std::function<bool(CgroupId)>& ran) {
  if (ran && ran(n.dir.id())) {
    n.tasks = 1;
    n.ran_tick = tick_;
    return true;
  }
  // A cgroup whose tasks do not run holds the same tasks unless one is moved in or out while asleep:
  // read now and then; and right after they stopped running (they may have exited).
  const bool stopped = n.ran_tick != 0 && n.ran_tick + 1 == tick_;
  if (n.tasks < 0 || stopped || due(n.tasks_tick, n.dir.id(), /*idle=*/true)) {
    auto r = n.dir.has_tasks();
    n.tasks = r && *r ? 1 : 0;
    n.tasks_tick = tick_;
  }
  return n.tasks == 1;
}

bool Inventory::takes(size_t rule, const Node& n) {
  if (!rules_.selects_path(rule, n.dir.path())) return false;
  const char* why = rules_.refused(rule, n.trust);
  if (why == nullptr) return true;
  // Tenants make as many cgroups as they like: the first few refusals of each rule are logged.
  constexpr unsigned kSaid = 4;
  if (refusals_said_.size() < rules_.size()) refusals_said_.resize(rules_.size());
  unsigned& said = refusals_said_[rule];
  const std::string who = "inventory: workload '" + rules_.rule(rule).name + "' ";
  if (said < kSaid)
    logging::line(logging::Level::warning, who + "does not take " + n.dir.path() + ": " + why);
  else if (said == kSaid)
    logging::line(logging::Level::warning, who + "refuses more cgroups, which are not logged");
  if (said <= kSaid) ++said;
  return false;
}

void Inventory::match(const std::function<bool(CgroupId)>& ran) {
  rules_.resolve(*defining_, roots_);
  std::vector<uint16_t> changed;
  for (size_t i = 0; i < rules_.size(); ++i)
    if (rules_.generation(i) != generations_[i]) changed.push_back(static_cast<uint16_t>(i));
  for (size_t i : changed) generations_[i] = rules_.generation(i);

  // Which rule each cgroup matches; the instances are built again only when that changed somewhere
  // (or cgroups came or went), else they stay as they are, none of them fresh.
  bool changed_any = tree_changed_;
  tree_changed_ = false;
  for (auto& [id, n] : nodes_) {
    const std::string& path = n.dir.path();
    if (!n.evaluated) {
      n.candidates.clear();
      for (size_t i = 0; i < rules_.size() && path != self_; ++i)
        if (takes(i, n)) n.candidates.push_back(static_cast<uint16_t>(i));
      n.evaluated = true;
    } else if (path != self_) {
      for (uint16_t i : changed) {
        auto it = std::lower_bound(n.candidates.begin(), n.candidates.end(), i);
        bool has = it != n.candidates.end() && *it == i;
        bool now = takes(i, n);
        if (has && !now) n.candidates.erase(it);
        if (!has && now) n.candidates.insert(it, i);
      }
    }
    int pick = -1;
    for (uint16_t i : n.candidates)
      if (!rules_.needs_tasks(i) || holds_tasks(n, ran)) {
        pick = i;
        break;
      }
    if (pick != n.rule) {
      n.rule = pick;
      n.instance = pick >= 0 ? rules_.instance_name(static_cast<size_t>(pick), path) : std::string();
      n.joined = tick_;
      n.spared = pick >= 0 && !rules_.rule(static_cast<size_t>(pick)).critical && host_daemon_path(path) &&
                 !rules_.names_exactly(static_cast<size_t>(pick));
      changed_any = true;
    }
  }
  if (!changed_any) {
    for (auto& ins : instances_) ins.fresh = false;
    return;
  }
  instances_.clear();
  // Same-named leaves of one `each` rule (a tenant's /be/t1/x and another's /be/t2/x) would be one
  // instance: each of them is named by its path instead.
  std::unordered_map<std::string_view, unsigned> by_leaf;
  for (const auto& [id, n] : nodes_)
    if (n.rule >= 0 && rules_.named_by_leaf(static_cast<size_t>(n.rule))) ++by_leaf[n.instance];
  std::unordered_map<std::string, size_t> at;
  for (auto& [id, n] : nodes_) {
    const int pick = n.rule;
    if (pick < 0) continue;
    auto b = by_leaf.find(n.instance);
    std::string name = b != by_leaf.end() && b->second > 1
                           ? rules_.instance_name(static_cast<size_t>(pick), n.dir.path(), true)
                           : n.instance;
    auto [it, added] = at.try_emplace(name, instances_.size());
    if (added) instances_.push_back({name, &spec_->workloads[static_cast<size_t>(pick)], {}, true});
    Instance& ins = instances_[it->second];
    ins.cgroups.push_back(&n);
    ins.fresh = ins.fresh && n.joined == tick_;
  }
  std::sort(instances_.begin(), instances_.end(),
            [](const Instance& a, const Instance& b) { return a.name < b.name; });
  for (auto& ins : instances_)
    std::sort(ins.cgroups.begin(), ins.cgroups.end(),
              [](const Node* a, const Node* b) { return a->dir.path() < b->dir.path(); });
}

// ---- Where files are ----

std::optional<Inventory::Place> Inventory::place(const Node& n, CgroupFile f) const {
  const CgroupHierarchy* h = hierarchy_for(layout_, *defining_, f);
  if (h == nullptr) return std::nullopt;
  if (is_defining(*h)) return Place{&n.dir, {}};
  const CgroupDir* root = root_of(*h);
  if (root == nullptr) return std::nullopt;
  return Place{root, std::string_view(n.dir.path()).substr(1)};
}

const CgroupDir* Inventory::hold(const Node& n, const CgroupHierarchy& h, const std::string& path) const {
  if (!n.apart) n.apart = std::make_unique<Node::Apart>();
  auto& held = n.apart->held;
  for (const auto& d : held)
    if (d->hierarchy().id == h.id && d->hierarchy().unified == h.unified && d->path() == path) return d.get();
  std::erase_if(
      held, [&](const auto& d) { return d->hierarchy().id == h.id && d->hierarchy().unified == h.unified; });
  const CgroupDir* root = root_of(h);
  if (root == nullptr) return nullptr;
  auto d = CgroupDir::open(root->hierarchy_ptr(), path);
  if (!d) return nullptr;
  held.push_back(std::make_unique<CgroupDir>(std::move(*d)));
  return held.back().get();
}

const CgroupDir* Inventory::held(const Node& n, CgroupFile f) const {
  const CgroupHierarchy* h = hierarchy_for(layout_, *defining_, f);
  if (h == nullptr) return nullptr;
  if (is_defining(*h)) return &n.dir;
  return hold(n, *h, n.dir.path());
}

const CgroupDir* Inventory::cpuset_dir(const Node& n) const {
  auto path = cpuset_cgroup(n);
  if (!path) return nullptr;
  if (is_defining(*cpuset_)) return &n.dir;
  return hold(n, *cpuset_, *path);
}

std::optional<std::string> Inventory::cpuset_cgroup(const Node& n) const {
  if (cpuset_ == nullptr) return std::nullopt;
  const std::string& path = n.dir.path();
  if (is_defining(*cpuset_)) return path == "/" ? std::nullopt : std::optional<std::string>(path);
  if (n.cpuset < 0 || due(n.cpuset_tick, n.dir.id(), /*idle=*/true)) {
    n.cpuset = 0;
    n.cpuset_tick = tick_;
    const CgroupDir* root = root_of(*cpuset_);
    struct stat st;
    if (path != "/" && root != nullptr && ::fstatat(root->fd(), path.c_str() + 1, &st, 0) == 0 &&
        S_ISDIR(st.st_mode)) {
      n.cpuset = 1;
    } else if (auto procs = n.dir.read(CgroupFile::procs)) {
      // Not laid out alike (only some hierarchies have the cgroup): the cpuset of one of its tasks. A pid
      // read from cgroup.procs may be reused by another process before its /proc/PID/cgroup is read, so
      // a task counts only when that same read puts it in this cgroup; the first few are tried.
      const CgroupHierarchy* both[] = {defining_.get(), cpuset_};
      std::string_view rest = *procs;
      for (int tried = 0; tried < 4 && !rest.empty(); ++tried) {
        pid_t pid = 0;
        auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), pid);
        if (ec != std::errc() || pid <= 0) break;
        rest.remove_prefix(std::min(rest.size(), static_cast<size_t>(end - rest.data()) + 1));
        auto p = process_cgroup_paths(roots_, pid, both);
        if (!p || (*p)[0] != path) continue;  // gone, or another process's by now
        if ((*p)[1] != "/") {
          n.cpuset = 2;
          if (!n.apart) n.apart = std::make_unique<Node::Apart>();
          n.apart->cpuset_path = std::move((*p)[1]);
        }
        break;
      }
    }
  }
  if (n.cpuset == 1) return path;
  if (n.cpuset == 2) return n.apart->cpuset_path;
  return std::nullopt;
}

}  // namespace keel::inv
