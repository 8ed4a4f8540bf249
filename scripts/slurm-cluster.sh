#!/usr/bin/env bash
# A single-node Slurm cluster on this machine, for `--backend slurm` and tests/test_slurm.py.
#
#   bash scripts/slurm-cluster.sh up      # install if missing, start munged, MariaDB, slurmdbd,
#                                         # slurmctld, slurmd; prints the SLURM_CONF to export
#   bash scripts/slurm-cluster.sh down    # stop them by their pid files (and cancel every job)
#   bash scripts/slurm-cluster.sh status  # exit 0 when the node answers and sacct works
#
# Both are idempotent: `up` starts only what is not running, `down` stops only what is.
# Root on Debian/Ubuntu (apt-get). No systemd: each daemon is started directly and stopped by
# the pid file it wrote. Accounting (slurmdbd + MariaDB) is there because submitit reads job
# states with `sacct`. Why each slurm.conf / cgroup.conf key: see docs/scale-out.md
# ("The single-node cluster"); in short, the job's
# --mem is enforced by the cgroup v1 memory controller (RAM and swap), the same mechanism as
# Docker's mem_limit = memswap_limit.
set -euo pipefail

STATE=${LODEVEM_SLURM_STATE:-/var/tmp/lodevem-slurm}
CLUSTER=lodevem
PARTITION=debug
CONF="$STATE/etc/slurm.conf"
DB_SOCKET=/run/mysqld/mysqld.sock   # where libmariadb looks for "localhost"
DB_PASS=lodevem-slurmdbd            # a socket-only database (--skip-networking), local to this state dir

log() { echo "slurm-cluster: $*" >&2; }

alive() {  # alive PIDFILE: the process named in PIDFILE is running
    [[ -s "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null
}

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
    local limit=$1 what=$2 i
    shift 2
    for ((i = 0; i < limit * 10; i++)); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.1
    done
    log "timed out waiting for $what"
    return 1
}

install_packages() {
    local missing=()
    command -v munged >/dev/null || missing+=(munge)
    command -v slurmctld >/dev/null || missing+=(slurm-wlm)
    command -v slurmdbd >/dev/null || missing+=(slurmdbd)
    command -v mariadbd >/dev/null || missing+=(mariadb-server)
    if ((${#missing[@]})); then
        log "installing ${missing[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
}

write_configs() {
    local node
    node=$(slurmd -C | head -1)   # NodeName=... CPUs=... RealMemory=...
    mkdir -p "$STATE"/{etc,log,run,spool/ctld,spool/d,mysql}
    cat >"$CONF" <<EOF
# written by scripts/slurm-cluster.sh
ClusterName=$CLUSTER
SlurmctldHost=$(hostname -s)
SlurmUser=root
AuthType=auth/munge
MpiDefault=none
ReturnToService=2
StateSaveLocation=$STATE/spool/ctld
SlurmdSpoolDir=$STATE/spool/d
SlurmctldPidFile=$STATE/run/slurmctld.pid
SlurmdPidFile=$STATE/run/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup,task/affinity
JobAcctGatherType=jobacct_gather/cgroup
JobAcctGatherFrequency=task=1
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
JobCompType=jobcomp/filetxt
JobCompLoc=$STATE/log/jobcomp.txt
SchedulerParameters=sched_interval=1
MinJobAge=60
KillWait=5
$node
PartitionName=$PARTITION Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
    cat >"$STATE/etc/cgroup.conf" <<EOF
ConstrainCores=yes
ConstrainRAMSpace=yes
ConstrainSwapSpace=yes
AllowedSwapSpace=0
EOF
    cat >"$STATE/etc/slurmdbd.conf" <<EOF
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
PidFile=$STATE/run/slurmdbd.pid
LogFile=$STATE/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=$DB_PASS
StorageLoc=slurm_acct_db
EOF
    chmod 600 "$STATE/etc/slurmdbd.conf"
}

start_munge() {
    install -d -o munge -g munge -m 0755 /run/munge
    if [[ ! -s /etc/munge/munge.key ]]; then
        mungekey -c -k /etc/munge/munge.key
        chown munge:munge /etc/munge/munge.key
    fi
    if ! alive /run/munge/munged.pid; then
        runuser -u munge -- munged
    fi
    wait_for 10 munged bash -c 'munge -n | unmunge'
}

start_mariadb() {
    install -d -o root -g root -m 0755 /run/mysqld
    if [[ ! -d "$STATE/mysql/mysql" ]]; then
        mariadb-install-db --user=root --datadir="$STATE/mysql" --auth-root-authentication-method=socket \
            >"$STATE/log/mariadb-install.log" 2>&1
    fi
    if ! alive "$STATE/run/mariadb.pid"; then
        mariadbd --user=root --datadir="$STATE/mysql" --socket="$DB_SOCKET" --pid-file="$STATE/run/mariadb.pid" \
            --skip-networking --log-error="$STATE/log/mariadb.log" >/dev/null 2>&1 &
        disown
    fi
    wait_for 30 MariaDB mariadb --socket="$DB_SOCKET" -e 'SELECT 1'
    mariadb --socket="$DB_SOCKET" -e "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
        GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';"
}

start_slurm() {
    export SLURM_CONF="$CONF"
    if ! alive "$STATE/run/slurmdbd.pid"; then
        slurmdbd
    fi
    wait_for 30 slurmdbd sacctmgr -n list cluster
    if ! sacctmgr -n -P list cluster format=cluster | grep -qx "$CLUSTER"; then
        sacctmgr -i add cluster "$CLUSTER" >/dev/null
    fi
    if ! alive "$STATE/run/slurmctld.pid"; then
        slurmctld -f "$CONF"
    fi
    wait_for 30 slurmctld scontrol ping
    if ! alive "$STATE/run/slurmd.pid"; then
        slurmd -f "$CONF"
    fi
    # The node is usable once it reports idle (or mixed/allocated when jobs are already running).
    wait_for 30 "node $(hostname -s)" bash -c "sinfo -h -N -o %T | grep -Eq '^(idle|mixed|allocated)'"
    wait_for 30 sacct sacct -n -X -S now
}

stop_pidfile() {  # stop_pidfile NAME PIDFILE: SIGTERM, wait up to 15 s, then SIGKILL
    local name=$1 file=$2 pid i
    alive "$file" || { rm -f "$file"; return 0; }
    pid=$(cat "$file")
    kill "$pid" 2>/dev/null || true
    for ((i = 0; i < 150; i++)); do
        kill -0 "$pid" 2>/dev/null || { rm -f "$file"; return 0; }
        sleep 0.1
    done
    log "$name (pid $pid) ignored SIGTERM; killing it"
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$file"
}

case "${1:-}" in
    up)
        install_packages
        write_configs
        start_munge
        start_mariadb
        start_slurm
        log "up: partition $PARTITION on $(hostname -s); export SLURM_CONF=$CONF"
        echo "SLURM_CONF=$CONF"
        ;;
    down)
        if alive "$STATE/run/slurmctld.pid"; then
            SLURM_CONF="$CONF" scancel --full --quiet --user="$(id -un)" 2>/dev/null || true
        fi
        stop_pidfile slurmd "$STATE/run/slurmd.pid"
        stop_pidfile slurmctld "$STATE/run/slurmctld.pid"
        stop_pidfile slurmdbd "$STATE/run/slurmdbd.pid"
        stop_pidfile mariadbd "$STATE/run/mariadb.pid"
        stop_pidfile munged /run/munge/munged.pid
        log "down"
        ;;
    status)
        export SLURM_CONF="$CONF"
        alive "$STATE/run/slurmctld.pid" && alive "$STATE/run/slurmd.pid" && alive "$STATE/run/slurmdbd.pid" \
            && scontrol ping >/dev/null 2>&1 && sacct -n -X -S now >/dev/null 2>&1
        ;;
    *)
        echo "usage: $0 up|down|status" >&2
        exit 2
        ;;
esac
