# Run on the test machine with Open OnDemand's job library (ood_core): the job script the
# dashboard would submit for an app, from its submit.yml.erb (the form's bc_num_slots=1 and
# gpus=0) and the portal's clusters.d, wrapped by ood_core's own batch_connect template.
# Prints one JSON object: the script and the app's sbatch options.
#   ruby ood_vnc_script.rb CLUSTERS_D APP_DIR WORK_DIR
require "erb"
require "json"
require "yaml"
require "ood_core"

clusters_d, app_dir, work_dir = ARGV
Form = Struct.new(:bc_num_slots, :gpus) { def scope = binding }
text = File.read(File.join(app_dir, "submit.yml.erb"))
submit = YAML.safe_load(ERB.new(text, trim_mode: "-").result(Form.new("1", "0").scope))
cluster = OodCore::Clusters.load_file(clusters_d).first
context = submit.fetch("batch_connect").transform_keys(&:to_sym).merge(work_dir: work_dir)
puts({ script: cluster.batch_connect_template(context).to_s, native: submit.dig("script", "native") }.to_json)
