# Run on a lab portal as the cluster user, with Open OnDemand's own job library (ood_core)
# loaded: what the dashboard does with the portal's clusters.d. Prints one JSON object.
#   ruby ood_core_jobs.rb CLUSTERS_D WORK_DIR
# 1. loads clusters.d as this user; 2. wraps a script in ood_core's batch_connect "basic"
# template (the cluster's set_host), submits it into WORK_DIR (the user's home, shared with the
# nodes) and waits for it; 3. submits a long job, finds it in info_all, deletes it.
require "json"
require "fileutils"
require "ood_core"

clusters_d, work_dir = ARGV
clusters = OodCore::Clusters.load_file(clusters_d)
cluster = clusters.first
adapter = cluster.job_adapter

FileUtils.mkdir_p(work_dir)
File.write(File.join(work_dir, "before.sh"), "port=$(find_port \"$host\")\npassword=$(create_passwd 16)\n")
File.write(File.join(work_dir, "script.sh"), "#!/usr/bin/env bash\nsleep 5\n")
File.chmod(0o755, File.join(work_dir, "script.sh"))
context = { template: "basic", work_dir: work_dir }.merge(cluster.batch_connect_config[:basic] || {})
content = OodCore::BatchConnect::Factory.build(context).to_s
session = adapter.submit(
  OodCore::Job::Script.new(
    content: content, workdir: work_dir, job_name: "ood-e2e-session", wall_time: 300,
    output_path: File.join(work_dir, "output.log"), shell_path: "/bin/bash"
  )
)
states = []
deadline = Time.now + 180
loop do
  state = adapter.info(session).status.to_sym
  states << state unless states.last == state
  break if state == :completed || Time.now > deadline

  sleep 1
end
connection = File.join(work_dir, "connection.yml")
connection = File.exist?(connection) ? File.read(connection) : nil

long = adapter.submit(OodCore::Job::Script.new(content: "#!/bin/bash\nsleep 600\n", workdir: work_dir))
listed = adapter.info_all.map(&:id)
adapter.delete(long)
deleted = nil
10.times do
  deleted = adapter.info(long).status.to_sym
  break if deleted == :completed

  sleep 1
end

puts({
  clusters: clusters.map { |c| c.id.to_s },
  session: session, states: states, connection: connection,
  long: long, listed: listed, deleted: deleted
}.to_json)
