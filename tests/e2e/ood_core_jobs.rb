# Run on a lab portal as the cluster user, with Open OnDemand's own job library (ood_core)
# loaded: what the dashboard's job views do with the portal's clusters.d. Prints one JSON
# object.
#   ruby ood_core_jobs.rb CLUSTERS_D WORK_DIR
# Loads clusters.d as this user, submits a long job from WORK_DIR, finds it in info_all and
# deletes it. (ood_session.rb launches an interactive app the same way.)
require "json"
require "ood_core"

clusters_d, work_dir = ARGV
clusters = OodCore::Clusters.load_file(clusters_d)
adapter = clusters.first.job_adapter

long = adapter.submit(OodCore::Job::Script.new(content: "#!/bin/bash\nsleep 600\n", workdir: work_dir))
listed = adapter.info_all.map(&:id)
adapter.delete(long)
deleted = nil
10.times do
  deleted = adapter.info(long).status.to_sym
  break if deleted == :completed

  sleep 1
end

puts({ clusters: clusters.map { |c| c.id.to_s }, long: long, listed: listed, deleted: deleted }.to_json)
